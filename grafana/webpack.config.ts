// The build of the plugin's frontend: @grafana/create-plugin's webpack
// configuration (.config/, not edited), extended the documented way.
import CopyWebpackPlugin from 'copy-webpack-plugin';
import type { Configuration } from 'webpack';

import grafanaConfig, { type Env } from './.config/webpack/webpack.config';
import { copyFilePatterns } from './.config/bundler/copyFiles';

const config = async (env: Env): Promise<Configuration> => {
  const base = await grafanaConfig(env);
  // ballast has no LICENSE file (no licence has been chosen yet): the
  // plugin ships none rather than one made up for it.
  base.plugins = (base.plugins ?? []).map((p) =>
    p instanceof CopyWebpackPlugin
      ? new CopyWebpackPlugin({ patterns: copyFilePatterns.filter((x) => x.from !== '../LICENSE') })
      : p
  );
  return base;
};

export default config;
