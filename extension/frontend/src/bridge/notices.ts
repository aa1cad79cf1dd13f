/**
 * What the bridge tells the user and the console: the console's prefix, and problems said once.
 */

import { Notification } from '@jupyterlab/apputils';

/** The prefix of the bridge's console lines. */
export const LOG = '[ipyagent-bridge]';

/** Problems said once each (a console warning and a notification that stays). */
export class Warnings {
  private readonly said = new Set<string>();

  warnOnce(text: string): void {
    if (this.said.has(text)) {
      return;
    }
    this.said.add(text);
    console.warn(LOG, text);
    Notification.warning(text, { autoClose: false });
  }
}
