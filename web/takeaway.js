// The page's take-away controls: SVG and PNG buttons under every chart, and the measurements
// (JSON, CSV) and a link to these settings in the take-away section.
import { chartPng, chartSvg, download, measurements, measurementsCsv, settingsUrl } from './export.js';

const $ = (id) => document.getElementById(id);

/**
 * Wires the controls. `state()` gives the visit's measurements ({device, model, judgments,
 * batch, bench}); `settings()` the URL parameters that reproduce the run.
 */
export function wireTakeAway({ state, settings }) {
  for (const chart of document.querySelectorAll('.chart[id]')) {
    const tools = Object.assign(document.createElement('div'), { className: 'chart-tools' });
    for (const format of ['svg', 'png']) {
      const button = Object.assign(document.createElement('button'), {
        type: 'button', textContent: format.toUpperCase(), className: 'small-button',
      });
      button.dataset.chart = chart.id;
      button.setAttribute('aria-describedby', chart.id); // the chart's own label names what it saves
      button.dataset.format = format;
      button.onclick = () => saveChart(chart, format);
      tools.append(button);
    }
    chart.after(tools);
  }
  $('save-json').onclick = () =>
    download('onetoken-measurements.json', JSON.stringify(measurements(state()), null, 1), 'application/json');
  $('save-csv').onclick = () => download('onetoken-measurements.csv', measurementsCsv(measurements(state())), 'text/csv');
  $('copy-link').onclick = async () => {
    const link = settingsUrl(settings());
    $('settings-link').value = link;
    $('settings-link').hidden = false;
    await navigator.clipboard?.writeText(link).catch(() => {}); // the field shows it either way
  };
}

async function saveChart(chart, format) {
  const name = `onetoken-${chart.id.replace(/^chart-/, '')}.${format}`;
  if (format === 'svg') {
    const svg = chartSvg(chart);
    if (svg) download(name, svg, 'image/svg+xml');
  } else {
    const png = await chartPng(chart);
    if (png) download(name, png);
  }
}
