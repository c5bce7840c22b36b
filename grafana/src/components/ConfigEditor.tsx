import React, { ChangeEvent } from 'react';
import { DataSourcePluginOptionsEditorProps } from '@grafana/data';
import { DataSourceHttpSettings, InlineField, Input, SecretInput } from '@grafana/ui';

import { BallastOptions, BallastSecureJsonData } from '../types';

type Props = DataSourcePluginOptionsEditorProps<BallastOptions, BallastSecureJsonData>;

/** URL of the mds (with Grafana's TLS and header options), a token, and a timeout. */
export function ConfigEditor(props: Props) {
  const { options, onOptionsChange } = props;
  const secure = options.secureJsonFields;

  const onTokenChange = (e: ChangeEvent<HTMLInputElement>) =>
    onOptionsChange({ ...options, secureJsonData: { ...options.secureJsonData, token: e.target.value } });
  const onTokenReset = () =>
    onOptionsChange({
      ...options,
      secureJsonFields: { ...secure, token: false },
      secureJsonData: { ...options.secureJsonData, token: '' },
    });
  const onTimeoutChange = (e: ChangeEvent<HTMLInputElement>) =>
    onOptionsChange({ ...options, jsonData: { ...options.jsonData, timeoutSeconds: parseInt(e.target.value, 10) || undefined } });

  return (
    <>
      <DataSourceHttpSettings
        defaultUrl="http://127.0.0.1:9750"
        dataSourceConfig={options}
        onChange={onOptionsChange}
        showAccessOptions={false}
      />
      <h3 className="page-heading">ballast</h3>
      <InlineField
        label="Token"
        labelWidth={20}
        tooltip="Bearer token for an mds that requires one: scope query to read, act as well to approve or reject actions. Stored encrypted by Grafana."
      >
        <SecretInput
          isConfigured={Boolean(secure?.token)}
          value={options.secureJsonData?.token ?? ''}
          placeholder="bearer token (leave empty if the mds needs none)"
          width={40}
          onReset={onTokenReset}
          onChange={onTokenChange}
        />
      </InlineField>
      <InlineField label="Timeout (s)" labelWidth={20} tooltip="Bound on one request to the mds; default 30 s.">
        <Input type="number" width={10} value={options.jsonData.timeoutSeconds ?? ''} placeholder="30" onChange={onTimeoutChange} />
      </InlineField>
    </>
  );
}
