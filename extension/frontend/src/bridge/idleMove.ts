/**
 * A notebook in layout 1 moves into layout 3 while the page is idle, a chunk at a time
 * (`ChunkedStore.migrateStep`, store/migration.ts): no turn pays for rewriting a long session
 * (one 276 ms task and 5.7 MB into the shared document for 5,000 entries, when the first turn did
 * it), and a step is one chunk's text. Under collaboration one page moves it (the one that stores
 * messages no page asked for). Said once, when done; the notebook is in layout 3 on disk from its
 * next save.
 */

import { Notification } from '@jupyterlab/apputils';

import type { ChunkedStore } from '../store/chunkedStore';
import { LAYOUT_TEXT } from '../store/layout3';
import type { IMoved } from '../store/migration';
import { LOG } from './notices';

type Later = (f: () => void) => void;

/** Runs `f` when the page is idle (within 2 s), or soon where there is no idle callback. */
function idleLater(): Later {
  const idle = (window as { requestIdleCallback?: (f: () => void, o?: { timeout: number }) => void })
    .requestIdleCallback;
  return idle ? (f: () => void) => idle.call(window, f, { timeout: 2000 }) : (f: () => void) => setTimeout(f, 50);
}

/** The move of one document's store, a step per idle callback. */
export class IdleMove {
  private moving = false;
  private started = false;
  private steps = 0;
  private longest = 0;
  private readonly later = idleLater();

  /** `writable` gives the store when this page may write it now (else null: the move stops). */
  constructor(private readonly writable: () => ChunkedStore | null) {}

  /** Start moving (nothing when a move is under way). */
  schedule(): void {
    if (this.moving) {
      return;
    }
    this.moving = true;
    this.started = false;
    this.steps = 0;
    this.longest = 0;
    this.later(() => this.step());
  }

  private step(): void {
    const store = this.writable();
    if (!store) {
      this.moving = false;
      return;
    }
    const since = performance.now();
    let result: 'none' | 'more' | 'done';
    try {
      result = store.migrateStep();
    } catch (e) {
      this.moving = false;
      console.warn(LOG, 'moving the sessions into layout 3 failed; the first write does it', e);
      return;
    }
    this.steps += 1;
    this.longest = Math.max(this.longest, performance.now() - since);
    if (result === 'more') {
      if (!this.started) {
        this.started = true;
        console.debug(LOG, `moving the sessions into layout ${LAYOUT_TEXT} while the page is idle`, { since });
      }
      this.later(() => this.step());
      return;
    }
    this.moving = false;
    if (result === 'done' && store.moved) {
      this.say(store.moved);
    }
  }

  private say({ entries, chunks }: IMoved): void {
    // in the user's words: the notebook reads modified because of this, and nothing else changed
    const text =
      `ipyagent: this notebook's agent history (${entries} entries) was in an older storage format ` +
      'and has been converted to the current one; that is the only change to the notebook, and ' +
      'saving it keeps the conversion.';
    console.info(LOG, text);
    console.debug(LOG, `the move into layout ${LAYOUT_TEXT} took`, {
      chunks,
      steps: this.steps,
      longest: this.longest
    });
    Notification.info(text, { autoClose: 8000 });
  }
}
