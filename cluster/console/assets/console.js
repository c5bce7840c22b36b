// ballast console: approve and reject buttons. Everything else on the page
// is rendered by the mds; this script only sends an operator's decision to
// the actions API, with the bearer token the operator typed (kept in
// sessionStorage, i.e. this tab only).
(function () {
  'use strict';
  var api = document.body.getAttribute('data-actions-url') || '/api/v1/actions';
  var token = document.getElementById('token');
  if (token) {
    token.value = sessionStorage.getItem('ballast-token') || '';
    token.addEventListener('change', function () { sessionStorage.setItem('ballast-token', token.value); });
  }
  function decide(button) {
    var id = button.getAttribute('data-id'), verb = button.getAttribute('data-verb');
    var row = button.closest('tr'), out = row.querySelector('.result');
    var headers = { 'Content-Type': 'application/json' };
    var t = token ? token.value : '';
    if (t) { headers.Authorization = 'Bearer ' + t; }
    row.querySelectorAll('button').forEach(function (b) { b.disabled = true; });
    out.textContent = verb === 'approve' ? 'approving…' : 'rejecting…';
    fetch(api + '/' + encodeURIComponent(id) + '/' + verb, { method: 'POST', headers: headers, body: '{}' })
      .then(function (r) {
        return r.text().then(function (body) {
          if (!r.ok) { throw new Error('HTTP ' + r.status + ': ' + body.slice(0, 300)); }
          out.textContent = verb === 'approve' ? 'approved' : 'rejected';
          row.classList.add(verb === 'approve' ? 'approved' : 'rejected');
          row.setAttribute('data-result', verb === 'approve' ? 'approved' : 'rejected');
        });
      })
      .catch(function (e) {
        out.textContent = 'failed: ' + e.message;
        row.setAttribute('data-result', 'error');
        row.querySelectorAll('button').forEach(function (b) { b.disabled = false; });
      });
  }
  document.querySelectorAll('button[data-verb]').forEach(function (b) {
    b.addEventListener('click', function () { decide(b); });
  });
})();
