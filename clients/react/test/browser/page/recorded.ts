// What the test page records on `window.voiceTest` for the browser test to read.

export interface Recorded {
  statuses: string[];
  events: Record<string, any>[];
  sent: Record<string, any>[];
  errors: string[];
  created: string[];
  connected?: string;
  ended: boolean;
  startResult?: string;
  startError?: string;
}
