import { DataSourceJsonData } from '@grafana/data';
import { DataQuery } from '@grafana/schema';

/** What a ballast query reads; the backend (pkg/plugin/queries.go) answers each. */
export type QueryType = 'findings' | 'actions' | 'capacity' | 'heat' | 'gpu_lost' | 'checkpoints';

export const queryTypes: Array<{ value: QueryType; label: string; description: string }> = [
  { value: 'findings', label: 'Findings', description: 'what the analyzers concluded: kind, subject, severity, since, summary, GPU-hours' },
  { value: 'actions', label: 'Actions', description: 'state, plan, bytes moved, measured effect' },
  { value: 'capacity', label: 'Capacity forecasts', description: 'history, forecast and interval band; days to 85/90/95 %' },
  { value: 'heat', label: 'Topology heat', description: 'data server × drive load, hottest stripes' },
  { value: 'gpu_lost', label: 'GPU-hours lost by cause', description: 'per cause over time' },
  { value: 'checkpoints', label: 'Checkpoint forecasts', description: 'predicted burst windows and bursts seen' },
];

export interface BallastQuery extends DataQuery {
  queryType?: QueryType;
  /** findings, checkpoints: "table" or "annotations" */
  format?: 'table' | 'annotations';
  kind?: string;
  subject?: string;
  state?: string;
  capacitySubject?: string;
  capacityView?: 'forecast' | 'table';
  heatView?: 'drives' | 'stripes';
  limit?: number;
  match?: string;
  groupBy?: 'cause_kind' | 'cause';
}

export const DEFAULT_QUERY: Partial<BallastQuery> = {
  queryType: 'findings',
  format: 'table',
};

/** jsonData of a ballast data source. The URL is Grafana's own URL field. */
export interface BallastOptions extends DataSourceJsonData {
  timeoutSeconds?: number;
}

/** secureJsonData: a bearer token when the mds requires one (scopes query, and act to approve). */
export interface BallastSecureJsonData {
  token?: string;
}

/** GET resources/options */
export interface EditorOptions {
  queryTypes: string[];
  kinds: string[];
  capacitySubjects: string[];
  groups: string[];
}
