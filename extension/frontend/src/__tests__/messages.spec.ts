/**
 * Reading the kernel's messages (messages.ts), the notebook tool's placement and outputs as text
 * (outputs.ts), and the push cut into parts (push.ts; tests/browser/test_frontend_push.py runs
 * the push's code in Python).
 */

import { insertPosition, readMessage } from '../messages';
import { JOURNAL_MIME, MAX_OUTPUT_TEXT, outputsText } from '../outputs';
import { pushCodes } from '../push';

describe('readMessage', () => {
  it('ignores what is no message of the protocol', () => {
    expect(readMessage('hello')).toBeNull();
    expect(readMessage(['entries'])).toBeNull();
    expect(readMessage({ type: 'delete_session', seq: 1 })).toBeNull();
  });

  it('says which known message is invalid', () => {
    expect(readMessage({ type: 'entries', seq: 4, session: 7 })).toEqual({ type: 'invalid', of: 'entries', seq: 4 });
    expect(readMessage({ type: 'insert_cell', seq: 5, cell_type: 'raw', source: '' })).toEqual({
      type: 'invalid',
      of: 'insert_cell',
      seq: 5
    });
  });

  it('reads an insert_cell request, dropping an id that is no nbformat id', () => {
    const read = readMessage({
      type: 'insert_cell',
      seq: 1,
      cell_type: 'code',
      source: 'x',
      cell_id: 'a b',
      anchor: 'c'
    });
    expect(read).toEqual({
      type: 'insert_cell',
      seq: 1,
      cell_id: null,
      cell_type: 'code',
      source: 'x',
      after: null,
      anchor: 'c'
    });
  });

  it('keeps an entries message without entries as an empty update', () => {
    expect(readMessage({ type: 'entries', session: 's', leaf: null })).toEqual({
      type: 'entries',
      seq: null,
      session: 's',
      entries: [],
      leaf: null,
      header: undefined,
      settings: undefined,
      active: false
    });
  });
});

describe('insertPosition', () => {
  it('puts a cell after the one named, else after the running one, else at the end', () => {
    expect(insertPosition(['a', 'b', 'c'], 'b', 'a')).toEqual({ index: 2, placement: 'after' });
    expect(insertPosition(['a', 'b', 'c'], 'gone', 'a')).toEqual({ index: 1, placement: 'anchor' });
    expect(insertPosition(['a', 'b', 'c'], null, null)).toEqual({ index: 3, placement: 'end' });
  });
});

describe('outputsText', () => {
  it('reads streams, errors, text and placeholders, and cuts a long output', () => {
    const outputs = [
      { output_type: 'stream', name: 'stdout', text: ['one\n', 'two\n'] },
      { output_type: 'error', ename: 'ValueError', evalue: 'bad', traceback: [] },
      { output_type: 'display_data', data: { [JOURNAL_MIME]: { entries: [] } }, metadata: {} },
      { output_type: 'execute_result', data: { 'image/png': 'x', 'text/html': 'y' }, metadata: {} },
      { output_type: 'stream', name: 'stdout', text: 'z'.repeat(MAX_OUTPUT_TEXT + 5) },
      'not an output'
    ];
    const lines = outputsText(outputs).split('\n');
    expect(lines.slice(0, 5)).toEqual([
      'one',
      'two',
      'ValueError: bad',
      "[ipyagent: this run's session entries]",
      '[image/png, text/html output]'
    ]);
    expect(lines[5]).toBe('z'.repeat(MAX_OUTPUT_TEXT));
    expect(lines[6]).toBe('… (cut)');
  });
});

describe('pushCodes', () => {
  it('cuts the JSON into parts that rebuild it, none ending inside an escape', () => {
    const meta = { sessions: { s: { entries: [{ id: 'x', note: "\\\\ ''' \\ é 😀 \\'''\\" }] } } };
    const json = JSON.stringify(meta);
    for (const size of [1, 2, 3, 7]) {
      const parts = pushCodes(meta, 'jupyterlab', 'p', size).map(code => /r'''(.*?)'''/s.exec(code)![1]);
      expect(parts.length).toBeGreaterThan(1);
      expect(JSON.parse(parts.join(''))).toEqual(JSON.parse(json));
      for (const part of parts) {
        expect(/^[\x00-\x7f]*$/.test(part)).toBe(true);
        expect(part.match(/\\*$/)![0].length % 2).toBe(0);
      }
    }
  });
});
