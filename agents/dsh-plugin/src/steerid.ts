// The order of a session's message ids, pkg/steerid's, so the plugin's /plan TEXT takes an id the
// admission webhook admits: after every id the session has used (the queue's last and
// status.agent.steerID). Digit runs compare by number (m9 < m10), other runs byte by byte, a
// digit run before any other run, a prefix first; ids equal in that order compare byte by byte.

const isDigit = (c: string) => c >= '0' && c <= '9';

function runEnd(s: string, i: number): number {
  const d = isDigit(s[i]!);
  let j = i + 1;
  while (j < s.length && isDigit(s[j]!) === d) j++;
  return j;
}

const bytes = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function compareNumbers(a: string, b: string): number {
  a = a.replace(/^0+/, '');
  b = b.replace(/^0+/, '');
  return a.length !== b.length ? (a.length < b.length ? -1 : 1) : bytes(a, b);
}

export function compareIds(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ra = runEnd(a, i);
    const rb = runEnd(b, j);
    const da = isDigit(a[i]!);
    const db = isDigit(b[j]!);
    if (da !== db) return da ? -1 : 1;
    const c = da ? compareNumbers(a.slice(i, ra), b.slice(j, rb)) : bytes(a.slice(i, ra), b.slice(j, rb));
    if (c !== 0) return c;
    i = ra;
    j = rb;
  }
  if (i < a.length) return 1;
  if (j < b.length) return -1;
  return bytes(a, b);
}

/** The last of ids in the order; '' for none. */
export function maxId(...ids: (string | undefined)[]): string {
  let m = '';
  for (const id of ids) if (id && (m === '' || compareIds(id, m) > 0)) m = id;
  return m;
}

/** A new id after last: prefix and the time in nanoseconds when that comes after, else last with its final number raised by one, or "-1" appended. */
export function nextId(prefix: string, last: string, nowMs = Date.now()): string {
  const id = prefix + (BigInt(nowMs) * 1000000n).toString();
  if (last === '' || compareIds(id, last) > 0) return id;
  const m = /^(.*?)(\d+)$/.exec(last);
  if (!m) return `${last}-1`;
  const digits = m[2]!;
  const raised = (BigInt(digits) + 1n).toString().padStart(digits.length, '0');
  return m[1]! + raised;
}
