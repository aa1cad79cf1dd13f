/**
 * The push (docs/protocol.md, "Rehydration"): the stored sessions handed to the kernel after it
 * starts, as the code of silent execute requests that call `ipyagent.bridge.comm.receive_push`.
 * No JupyterLab imports.
 */

import { asciiJson } from './json';

/** The largest part of a push, in characters of (ASCII) JSON text: far below the server's
 * websocket limit (tornado's 10 MiB default, which operators may lower). */
export const PUSH_PART_CHARS = 1 << 20;

function pushRequest(call: string): string {
  return [
    'try:',
    '    import ipyagent.bridge.comm as _ipyagent_b',
    `    _ipyagent_b.${call}`,
    '    del _ipyagent_b',
    'except (ImportError, AttributeError):',
    '    pass',
    ''
  ].join('\n');
}

/** Where the part starting at `start` ends: at most `partChars` characters, never after an odd
 * run of backslashes (a raw string cannot end with one). */
function partEnd(json: string, start: number, partChars: number): number {
  let end = Math.min(start + partChars, json.length);
  let slashes = 0;
  while (end - slashes > start && json[end - 1 - slashes] === '\\') {
    slashes++;
  }
  if (slashes % 2 === 1) {
    end -= 1;
  }
  if (end <= start) {
    end = start + 2; // a part of one backslash: JSON always follows it with the escaped character
  }
  return end;
}

/** `json` cut into parts of at most `partChars` characters (see `partEnd`). */
function cut(json: string, partChars: number): string[] {
  const parts: string[] = [];
  let start = 0;
  while (start < json.length) {
    const end = partEnd(json, start, partChars);
    parts.push(json.slice(start, end));
    start = end;
  }
  return parts;
}

/**
 * The silent execute requests' code: one request when the JSON is small, else one per part of
 * at most `partChars` characters (bytes: the text is ASCII), sent in order. The JSON goes into a
 * Python raw triple-quoted string; every `'` is written `\u0027` (still the same JSON), so no
 * part can hold three quotes, and no part ends with an odd run of backslashes.
 */
export function pushCodes(meta: unknown, source: string, push: string, partChars = PUSH_PART_CHARS): string[] {
  const json = asciiJson(meta).replace(/'/g, '\\u0027');
  const src = JSON.stringify(source);
  const q = "'''";
  if (json.length <= partChars) {
    return [pushRequest(`receive_push(r${q}${json}${q}, source=${src})`)];
  }
  const parts = cut(json, partChars);
  const id = JSON.stringify(push);
  return parts.map((part, index) =>
    pushRequest(`receive_push_part(r${q}${part}${q}, push=${id}, index=${index}, count=${parts.length}, source=${src})`)
  );
}

/** The push as one request's code (small sessions; kept for callers and tests of version 1). */
export function pushCode(meta: unknown, source: string): string {
  return pushCodes(meta, source, 'push', Infinity)[0];
}
