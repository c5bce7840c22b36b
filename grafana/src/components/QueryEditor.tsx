import React, { useEffect, useState } from 'react';
import { QueryEditorProps, SelectableValue } from '@grafana/data';
import { InlineField, InlineFieldRow, Input, RadioButtonGroup, Select } from '@grafana/ui';

import { DataSource } from '../datasource';
import { BallastOptions, BallastQuery, EditorOptions, QueryType, queryTypes } from '../types';

type Props = QueryEditorProps<DataSource, BallastQuery, BallastOptions>;

const formats: Array<SelectableValue<'table' | 'annotations'>> = [
  { value: 'table', label: 'Table' },
  { value: 'annotations', label: 'Annotations' },
];

const capacityViews: Array<SelectableValue<'forecast' | 'table'>> = [
  { value: 'forecast', label: 'Forecast' },
  { value: 'table', label: 'Days to 85/90/95 %' },
];

const heatViews: Array<SelectableValue<'drives' | 'stripes'>> = [
  { value: 'drives', label: 'Data servers × drives' },
  { value: 'stripes', label: 'Hottest stripes' },
];

const groupBys: Array<SelectableValue<'cause_kind' | 'cause'>> = [
  { value: 'cause_kind', label: 'Cause kind' },
  { value: 'cause', label: 'Cause (subject)' },
];

const toOptions = (xs: string[]): Array<SelectableValue<string>> => xs.map((x) => ({ value: x, label: x }));

/** One row per setting of the chosen query type; choices come from the mds (resources/options). */
export function QueryEditor({ query, onChange, onRunQuery, datasource }: Props) {
  const [opts, setOpts] = useState<EditorOptions | undefined>();
  const [optsError, setOptsError] = useState<string | undefined>();
  useEffect(() => {
    datasource
      .getEditorOptions()
      .then(setOpts)
      .catch((e) => setOptsError(String(e?.data?.error ?? e?.message ?? e)));
  }, [datasource]);

  const qt: QueryType = query.queryType ?? 'findings';
  const set = (patch: Partial<BallastQuery>) => {
    onChange({ ...query, ...patch });
    onRunQuery();
  };
  const text = (key: 'subject' | 'state' | 'match') => (e: React.FormEvent<HTMLInputElement>) =>
    onChange({ ...query, [key]: e.currentTarget.value });

  return (
    <>
      <InlineFieldRow>
        <InlineField label="Query" labelWidth={14} tooltip={queryTypes.find((t) => t.value === qt)?.description}>
          <Select
            width={30}
            options={queryTypes}
            value={qt}
            onChange={(v) => set({ queryType: v.value as QueryType })}
          />
        </InlineField>
        {(qt === 'findings' || qt === 'checkpoints') && (
          <InlineField label="Format" labelWidth={10}>
            <RadioButtonGroup options={formats} value={query.format ?? 'table'} onChange={(v) => set({ format: v })} />
          </InlineField>
        )}
      </InlineFieldRow>

      {(qt === 'findings' || qt === 'actions') && (
        <InlineFieldRow>
          <InlineField label="Kind" labelWidth={14}>
            <Select
              width={30}
              isClearable
              allowCustomValue
              options={toOptions(opts?.kinds ?? [])}
              value={query.kind}
              onChange={(v) => set({ kind: v?.value })}
            />
          </InlineField>
          <InlineField label="Subject" labelWidth={10} tooltip="kind:id or id, e.g. device:ds07/nvme3n1; variables allowed">
            <Input width={30} value={query.subject ?? ''} onChange={text('subject')} onBlur={onRunQuery} />
          </InlineField>
          <InlineField label="State" labelWidth={10} tooltip={qt === 'findings' ? 'active, or empty for every finding in the time range' : 'proposed, approved, running, succeeded, failed, cancelled'}>
            <Input width={16} value={query.state ?? ''} onChange={text('state')} onBlur={onRunQuery} />
          </InlineField>
        </InlineFieldRow>
      )}

      {qt === 'capacity' && (
        <InlineFieldRow>
          <InlineField label="View" labelWidth={14}>
            <RadioButtonGroup
              options={capacityViews}
              value={query.capacityView ?? 'forecast'}
              onChange={(v) => set({ capacityView: v })}
            />
          </InlineField>
          {(query.capacityView ?? 'forecast') === 'forecast' && (
            <InlineField label="Subject" labelWidth={10}>
              <Select
                width={30}
                allowCustomValue
                options={toOptions(opts?.capacitySubjects ?? ['cluster'])}
                value={query.capacitySubject ?? 'cluster'}
                onChange={(v) => set({ capacitySubject: v.value })}
              />
            </InlineField>
          )}
        </InlineFieldRow>
      )}

      {qt === 'heat' && (
        <InlineFieldRow>
          <InlineField label="View" labelWidth={14}>
            <RadioButtonGroup
              options={heatViews}
              value={query.heatView ?? 'drives'}
              onChange={(v) => set({ heatView: v })}
            />
          </InlineField>
          {(query.heatView ?? 'drives') === 'drives' ? (
            <InlineField label="Match" labelWidth={10} tooltip='extra label matchers, e.g. pool="fast"'>
              <Input width={30} value={query.match ?? ''} onChange={text('match')} onBlur={onRunQuery} />
            </InlineField>
          ) : (
            <InlineField label="Top" labelWidth={10}>
              <Input
                type="number"
                width={10}
                value={query.limit ?? 20}
                onChange={(e) => onChange({ ...query, limit: parseInt(e.currentTarget.value, 10) || undefined })}
                onBlur={onRunQuery}
              />
            </InlineField>
          )}
        </InlineFieldRow>
      )}

      {qt === 'gpu_lost' && (
        <InlineFieldRow>
          <InlineField label="By" labelWidth={14}>
            <RadioButtonGroup
              options={groupBys}
              value={query.groupBy ?? 'cause_kind'}
              onChange={(v) => set({ groupBy: v })}
            />
          </InlineField>
        </InlineFieldRow>
      )}

      {qt === 'checkpoints' && (
        <InlineFieldRow>
          <InlineField label="Group" labelWidth={14} tooltip="a client group; empty for all">
            <Select
              width={30}
              isClearable
              allowCustomValue
              options={toOptions(opts?.groups ?? [])}
              value={query.subject}
              onChange={(v) => set({ subject: v?.value })}
            />
          </InlineField>
        </InlineFieldRow>
      )}
      {optsError && <div className="gf-form-label">Cannot load choices from the mds: {optsError}</div>}
    </>
  );
}
