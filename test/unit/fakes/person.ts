import type { AccessMode, AgentAction, Answer, Person } from '../../../src/core/agents/accessPolicy';

/** A person in a unit test (a fake): a mode the test sets, and scripted answers to `ask`. */
export class FakePerson implements Person {
  current: AccessMode = 'full';
  answers: Answer[] = [];
  asked: AgentAction[] = [];
  limitMs = 0;
  mode = () => this.current;
  maxRunMs = () => this.limitMs;
  ask = async (action: AgentAction, _left?: AbortSignal): Promise<Answer> => {
    this.asked.push(action);
    return this.answers.shift() ?? 'no-answer';
  };
}
