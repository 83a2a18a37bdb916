// The session log's event envelope, its validation and the tail fold: the same rules as the Go
// store (pkg/harness validate.go and tail.go), so a batch the harness writes through this
// package is stored, refused and folded exactly as the manager's store would. The golden
// vectors in pkg/sessionlog/testdata/golden hold both to that.

export interface LogEvent {
  type: string;
  seq: number;
  time: number;
  data: unknown;
  ignorable?: boolean;
  sourceEventSeqs?: number[];
  surfaceOp?: unknown;
}

/** The O(1) per-session state the protocol reads (docs/protocol.md section 3). */
export interface Tail {
  nextSeq: number;
  active: boolean;
  lastPlanModeSeq: number;
  told: boolean | null;
  turnOpen: boolean;
  turn: number;
  lastStepStartSeq: number;
  step: number;
  stepOpen: boolean;
}

export function emptyTail(): Tail {
  return { nextSeq: 0, active: false, lastPlanModeSeq: -1, told: null, turnOpen: false, turn: 0, lastStepStartSeq: -1, step: 0, stepOpen: false };
}

/** A batch refused because its first seq is not the stored next seq; nothing was written. */
export class ConflictError extends Error {
  constructor(readonly sessionId: string, readonly expected: number, readonly got: number) {
    super(`append to session "${sessionId}": seq conflict: batch starts at ${got}, stored next seq is ${expected}`);
    this.name = 'ConflictError';
  }
}

/** An event the store refuses, naming the field and what is wrong with it. */
export class ValidationError extends Error {
  constructor(readonly sessionId: string, readonly seq: number, readonly type: string, readonly field: string, readonly detail: string) {
    super(`append to session "${sessionId}": invalid event: seq ${seq}${type ? ` (${type})` : ''}${field ? ` field ${field}` : ''}: ${detail}`);
    this.name = 'ValidationError';
  }
}

export interface Facts { turn: number; step: number; active: boolean }

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown) => (v === undefined ? 'undefined' : JSON.stringify(v));

/** Checks one event as pkg/harness Check does for the types plan mode reads or writes. */
export function check(sessionId: string, ev: LogEvent): Facts {
  const fail = (field: string, detail: string): never => { throw new ValidationError(sessionId, ev.seq, ev.type, field, detail); };
  const f: Facts = { turn: 0, step: 0, active: false };
  if (typeof ev.type !== 'string' || ev.type === '') fail('type', 'type is empty; every event needs a type such as "plan/mode"');
  if (ev.type === 'session') fail('type', 'type "session" is reserved for the JSONL header line');
  if (!Number.isSafeInteger(ev.seq) || ev.seq < 0) fail('seq', `seq is ${ev.seq}; seqs are contiguous from 0`);
  if (!Number.isSafeInteger(ev.time) || ev.time < 0) fail('time', `time is ${ev.time}; expected Unix epoch milliseconds`);
  if (ev.data === undefined) fail('data', 'data is missing; every event carries a JSON value (use {} for none)');
  const integer = (m: Obj, key: string): number => {
    const v = m[key];
    if (v === undefined) fail(`data.${key}`, `${key} is missing; expected a non-negative integer`);
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) fail(`data.${key}`, `${key} is ${text(v)}; expected a non-negative integer`);
    return v as number;
  };
  const object = (): Obj => {
    if (!isObj(ev.data)) fail('data', `${ev.type} data is ${text(ev.data)}; expected an object`);
    return ev.data as Obj;
  };
  switch (ev.type) {
    case 'plan/mode': {
      const m = isObj(ev.data) ? ev.data : undefined;
      if (m === undefined || typeof m.active !== 'boolean') fail('data.active', `plan/mode carries invalid active state ${text(m?.active)}; expected a boolean`);
      for (const k of Object.keys(m as Obj)) if (k !== 'active') fail(`data.${k}`, `plan/mode carries unexpected field "${k}"; data must be exactly {"active": boolean}`);
      f.active = (m as Obj).active === true;
      break;
    }
    case 'turn/start': f.turn = integer(object(), 'turn'); break;
    case 'turn/end': {
      const m = object();
      f.turn = integer(m, 'turn');
      const r = m.reason;
      if (!isObj(r)) fail('data.reason', `reason is ${text(r)}; expected an object with a string kind`);
      if (typeof (r as Obj).kind !== 'string' || (r as Obj).kind === '') fail('data.reason.kind', `reason.kind is ${text((r as Obj).kind)}; expected a non-empty string`);
      break;
    }
    case 'step/start': case 'step/end': {
      const m = object();
      f.turn = integer(m, 'turn');
      f.step = integer(m, 'step');
      break;
    }
    case 'request/header': case 'user/message': case 'command/run': case 'command/done': object(); break;
  }
  return f;
}

/** Folds one event into the tail (pkg/harness Tail.Apply). */
export function apply(t: Tail, ev: LogEvent, f: Facts): void {
  t.nextSeq = ev.seq + 1;
  switch (ev.type) {
    case 'plan/mode': t.active = f.active; t.lastPlanModeSeq = ev.seq; break;
    case 'request/header': t.told = t.active; break;
    case 'turn/start': t.turn = f.turn; t.turnOpen = true; t.step = 0; t.stepOpen = false; break;
    case 'turn/end': t.turnOpen = false; t.step = 0; t.stepOpen = false; break;
    case 'step/start': t.step = f.step; t.stepOpen = true; t.lastStepStartSeq = ev.seq; break;
    case 'step/end': t.stepOpen = false; break;
  }
}

/** The tail of a whole log, events from seq 0 (a reader's fold; the store keeps it incrementally). */
export function foldTail(events: readonly LogEvent[], sessionId = ''): Tail {
  const t = emptyTail();
  for (const ev of events) apply(t, ev, check(sessionId, ev));
  return t;
}
