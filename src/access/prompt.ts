import * as vscode from 'vscode';
import type { AgentAction, Answer } from '../core/access';

const ALLOW = 'Allow';
const ALLOW_10 = 'Allow for 10 Minutes';
const DENY = 'Deny';
const SHOW = 'Show Code';

/**
 * The `ask` mode's question: a notification naming the client, the action and the notebook, with
 * the code in full on request. No answer within `timeoutMs` is a refusal (the notification may
 * stay on screen; a late click changes nothing).
 */
export async function askPerson(action: AgentAction, where: string, timeoutMs: number): Promise<Answer> {
  const deadline = Date.now() + timeoutMs;
  const message = `${action.client} wants a ${action.label} in ${where}: ${action.summary} (no answer in ${Math.round(timeoutMs / 1000)} s: denied)`;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return 'no-answer';
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), left)));
    const choice = await Promise.race([vscode.window.showWarningMessage(message, ALLOW, ALLOW_10, DENY, SHOW), expired]);
    clearTimeout(timer);
    if (choice === ALLOW) return 'allow';
    if (choice === ALLOW_10) return 'allow-10-minutes';
    if (choice === DENY) return 'deny';
    if (choice === undefined) return Date.now() >= deadline ? 'no-answer' : 'deny';
    const doc = await vscode.workspace.openTextDocument({
      content: action.code,
      language: action.kind === 'execute' ? 'python' : 'json',
    });
    await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: true });
  }
}
