// Hides the secrets of a log store's connection string before it is printed, logged or put
// into an error: pkg/connstr's rule, line for line (Redact, Error, Secrets), so the plugin and
// the operator's binaries mask the same things in the same places.
//
// A secret is masked where it stands, never its text elsewhere (a password "p" leaves "dial
// tcp" alone): the URL's user-info password, from the first ':' after "://" to the last '@' of
// the string, so a raw '/', '?', '#', '@' or space in it is still masked whole; password and
// sslpassword query values (keys compared decoded, any case); key=value values, single-quoted
// with backslash escapes, or unquoted up to the next blank (a word after one that is no
// key=value pair is masked too: no client reads such a string). In a text that quotes
// connection strings a URL ends at the next blank or quote.

/** What every secret is replaced with. */
export const MASK = 'xxxxx';

const urlStart = /[A-Za-z][A-Za-z0-9+.-]*:\/\//;
// A secret key at a word boundary, and its '='; group 1 is the key.
const secretKey = /(?:^|[^A-Za-z0-9_])(sslpassword|password)[ \t\n\r\v\f]*=[ \t\n\r\v\f]*/i;

interface Span { start: number; end: number; value: string }

const isBlank = (c: string | undefined) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\v' || c === '\f';
const isURL = (s: string) => urlStart.exec(s)?.index === 0;

/** s with every secret masked: a connection string (a URL when s starts with scheme://, to its end) or a text quoting them. */
export function redact(s: string): string {
  return mask(s, spans(s, isURL(s)));
}

/** The secrets of conn as a client reads them (percent-decoded, unquoted). */
export function secrets(conn: string): string[] {
  return spans(conn, isURL(conn)).map((sp) => sp.value);
}

/** msg with every occurrence of conn replaced by redact(conn), then every secret of the text masked. */
export function redactError(msg: string, conn: string): string {
  if (conn !== '') msg = msg.split(conn).join(redact(conn));
  return mask(msg, spans(msg, false));
}

function mask(s: string, sps: Span[]): string {
  if (sps.length === 0) return s;
  let out = '';
  let at = 0;
  for (const sp of sps) {
    out += s.slice(at, sp.start) + MASK;
    at = sp.end;
  }
  return out + s.slice(at);
}

function spans(s: string, whole: boolean): Span[] {
  if (whole) return urlSpans(s, 0, s.length);
  const out: Span[] = [];
  for (let i = 0; i < s.length;) {
    const rest = s.slice(i);
    const u = urlStart.exec(rest);
    const k = secretKey.exec(rest);
    const kKey = k ? k.index + k[0].length - k[0].replace(/^[^A-Za-z]/, '').length : -1; // where the key itself starts
    if (k && (!u || kKey <= u.index)) {
      const from = i + k.index + k[0].length;
      const sp = kvValue(s, from);
      if (sp.end > sp.start) out.push(sp);
      i = Math.max(sp.end, from);
    } else if (u) {
      const end = urlEnd(s, i + u.index + u[0].length);
      out.push(...urlSpans(s, i + u.index, end));
      i = end;
    } else {
      break;
    }
  }
  return out;
}

function urlEnd(s: string, from: number): number {
  let end = s.length;
  for (let j = from; j < s.length; j++) {
    if (isBlank(s[j]) || '"\'`<>'.includes(s[j]!)) { end = j; break; }
  }
  while (end > from && (s[end - 1] === ':' || s[end - 1] === ',')) end--;
  return end;
}

function urlSpans(s: string, start: number, end: number): Span[] {
  const out: Span[] = [];
  const rest = start + s.slice(start, end).indexOf('://') + 3;
  let queryFrom = rest;
  const at = s.slice(rest, end).lastIndexOf('@');
  if (at >= 0) {
    const userinfo = s.slice(rest, rest + at);
    const c = userinfo.indexOf(':');
    if (c >= 0 && c + 1 < userinfo.length) out.push({ start: rest + c + 1, end: rest + at, value: uriDecode(userinfo.slice(c + 1)) });
    queryFrom = rest + at + 1;
  }
  const q = s.slice(queryFrom, end).indexOf('?');
  if (q < 0) return out;
  const qs = queryFrom + q + 1;
  let qe = end;
  const h = s.slice(qs, end).indexOf('#');
  if (h >= 0) qe = qs + h;
  for (let p = qs; p <= qe;) {
    const amp = s.slice(p, qe).indexOf('&');
    const pe = amp >= 0 ? p + amp : qe;
    const eq = s.slice(p, pe).indexOf('=');
    if (eq >= 0 && isSecretKey(uriDecode(s.slice(p, p + eq))) && p + eq + 1 < pe) {
      out.push({ start: p + eq + 1, end: pe, value: uriDecode(s.slice(p + eq + 1, pe)) });
    }
    p = pe + 1;
  }
  return out;
}

/** A URL component as libpq and pgx decode it: %XX escapes, blanks at either end dropped, '+' kept. */
function uriDecode(raw: string): string {
  raw = raw.replace(/^ +| +$/g, '');
  const bytes: number[] = [];
  const enc = new TextEncoder();
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === '%' && i + 2 < raw.length && /^[0-9A-Fa-f]{2}$/.test(raw.slice(i + 1, i + 3))) {
      bytes.push(parseInt(raw.slice(i + 1, i + 3), 16));
      i += 2;
      continue;
    }
    bytes.push(...enc.encode(raw[i]!));
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

const isSecretKey = (k: string) => /^(ssl)?password$/i.test(k);

function kvValue(s: string, from: number): Span {
  let value = '';
  let i = from;
  if (s[i] === '\'') {
    for (i++; i < s.length; i++) {
      if (s[i] === '\\' && i + 1 < s.length) { i++; value += s[i]; continue; }
      if (s[i] === '\'') return { start: from, end: i + 1, value };
      value += s[i];
    }
    return { start: from, end: s.length, value };
  }
  for (; i < s.length && !isBlank(s[i]); i++) {
    if (s[i] === '\\') {
      if (i + 1 === s.length) break; // a trailing backslash ends the value, dropped
      i++;
    }
    value += s[i];
  }
  let end = i;
  while (end < s.length) {
    let j = end;
    while (j < s.length && isBlank(s[j])) j++;
    let k = j;
    while (k < s.length && !isBlank(s[k]) && s[k] !== '=') k++;
    if (k === j || (k < s.length && s[k] === '=')) break;
    end = k;
  }
  return { start: from, end, value };
}
