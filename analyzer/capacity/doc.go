// Package capacity forecasts when devices, data servers, pools and the
// whole cluster fill, with prediction intervals, and says whether a pool
// keeps enough free space to evacuate its largest data server or its
// at-risk drives.
//
// The model (see docs/capacity.md) is fitted per series on the used share
// of capacity: a local-linear trend (exponentially down-weighted history,
// so the growth rate follows recent behaviour), a level shift at each
// persistent step change (with a new growth rate after the latest one once
// a day of history follows it: a deleted tenant usually stops writing too),
// and Fourier terms for the daily and weekly cycles
// and the checkpoint cadence when the history spans at least two of them,
// with weekends given their own level and daily profile once a week of
// history is there.
// The fit is weighted least squares with Huber re-weighting (gonum's QR),
// so single spikes do not bend the trend. Prediction intervals come from
// the model's own errors: the fit is repeated at earlier origins inside the
// history and the squared errors at each lead time are fitted by
// a² + b²h², a level noise plus a growth-rate error that grows linearly with
// the lead h — which is how forecast errors of autocorrelated capacity
// series behave — floored by the analytic slope error widened for the
// residuals' lag-1 autocorrelation.
//
// From the mean path and the band the package derives the time until 85 %,
// 90 % and 95 % full (nearfull, backfillfull and full in Ceph's terms): the
// mean crossing, the earliest (upper band) and the latest (lower band).
//
// PredictLinear implements Prometheus' predict_linear exactly (least
// squares over a range, intercept at the evaluation time), the baseline
// Ceph's alert rules use over two days; Backtest scores both on histories
// with known outcomes.
//
// The package is pure: it takes samples and `now`, reads no clock, does no
// I/O and starts no goroutines; the same input gives the same output.
package capacity
