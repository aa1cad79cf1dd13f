/**
 * Cell outputs: a journal output (`application/vnd.ipyagent.entries+json`, the run's entries
 * when no frontend stored them) read into a store update, and a cell's outputs as the text the
 * notebook tool's `read_cells` answers with. No JupyterLab imports.
 */

import { isObject } from './json';
import type { IUpdate } from './store/metadata';

export const JOURNAL_MIME = 'application/vnd.ipyagent.entries+json';

/** Characters of one output kept when the kernel reads the cells. */
export const MAX_OUTPUT_TEXT = 10000;

/** Read a journal output's data into an update (or null when it is not one). */
export function updateFromJournal(payload: unknown): IUpdate | null {
  if (!isObject(payload) || !Array.isArray(payload.entries)) {
    return null;
  }
  const session = typeof payload.session === 'string' ? payload.session : 'default';
  return {
    session,
    entries: payload.entries,
    leaf: 'leaf' in payload ? payload.leaf : undefined,
    header: 'header' in payload ? payload.header : undefined,
    settings: 'settings' in payload ? payload.settings : undefined,
    active: false
  };
}

function joined(v: unknown): string {
  return Array.isArray(v) ? v.map(String).join('') : typeof v === 'string' ? v : '';
}

/** One output (nbformat JSON) as text. */
function outputText(o: { [key: string]: unknown }): string {
  if (o.output_type === 'stream') {
    return joined(o.text);
  }
  if (o.output_type === 'error') {
    return `${joined(o.ename) || 'Error'}: ${joined(o.evalue)}`;
  }
  if (!isObject(o.data)) {
    return '';
  }
  const data = o.data;
  if (JOURNAL_MIME in data) {
    return "[ipyagent: this run's session entries]";
  }
  if ('text/plain' in data) {
    return joined(data['text/plain']);
  }
  return `[${Object.keys(data).sort().join(', ')} output]`;
}

/** A cell's outputs (nbformat JSON) as text: streams, `text/plain`, errors, placeholders. */
export function outputsText(outputs: unknown): string {
  const parts: string[] = [];
  for (const o of Array.isArray(outputs) ? outputs : []) {
    if (!isObject(o)) {
      continue;
    }
    let text = outputText(o);
    if (text.length > MAX_OUTPUT_TEXT) {
      text = text.slice(0, MAX_OUTPUT_TEXT) + '\n… (cut)';
    }
    parts.push(text.replace(/\n+$/, ''));
  }
  return parts.join('\n');
}
