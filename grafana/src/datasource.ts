import { CoreApp, DataSourceInstanceSettings, ScopedVars } from '@grafana/data';
import { DataSourceWithBackend, getTemplateSrv } from '@grafana/runtime';

import { BallastOptions, BallastQuery, DEFAULT_QUERY, EditorOptions } from './types';

/** The ballast data source: every query is answered by the plugin's backend. */
export class DataSource extends DataSourceWithBackend<BallastQuery, BallastOptions> {
  constructor(instanceSettings: DataSourceInstanceSettings<BallastOptions>) {
    super(instanceSettings);
    // Findings and checkpoint forecasts can be annotations: the backend
    // returns time, timeEnd, title, text and tags fields.
    this.annotations = {};
  }

  getDefaultQuery(app: CoreApp): Partial<BallastQuery> {
    if (app === CoreApp.UnifiedAlerting) {
      return { queryType: 'gpu_lost' };
    }
    return DEFAULT_QUERY;
  }

  /** Dashboard variables ($ds, $pool, …) in the text fields of a query. */
  applyTemplateVariables(query: BallastQuery, scopedVars: ScopedVars): BallastQuery {
    const t = getTemplateSrv();
    const r = (s?: string) => (s ? t.replace(s, scopedVars) : s);
    return {
      ...query,
      kind: r(query.kind),
      subject: r(query.subject),
      state: r(query.state),
      capacitySubject: r(query.capacitySubject),
      match: r(query.match),
    };
  }

  filterQuery(query: BallastQuery): boolean {
    return !query.hide;
  }

  /** The choices the query editor offers, from the mds. */
  getEditorOptions(): Promise<EditorOptions> {
    return this.getResource<EditorOptions>('options');
  }

  /** Approve, reject or cancel an action (the data source needs a token with the act scope). */
  decide(actionID: string, verb: 'approve' | 'reject' | 'cancel'): Promise<unknown> {
    return this.postResource(`actions/${encodeURIComponent(actionID)}/${verb}`, {});
  }
}
