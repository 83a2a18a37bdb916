// Hides the secrets of a log store's connection string before it is printed, logged or put
// into an error: the rule of pkg/connstr (Redact, RedactText, RedactFor), so the plugin and the
// operator's binaries mask the same things the same way.

/** What every secret is replaced with. */
export const MASK = 'xxxxx';

// A key=value pair of a DSN, or a query parameter of a URL (libpq's password and sslpassword);
// a value is a quoted string with backslash escapes, or runs to the next blank, '&' or quote.
const secretParam = () => /\b(password|sslpassword)(\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&'"]*)/gi;
// The user-info password of any URL quoted in a text: scheme://user:secret@
const userinfoPassword = () => /([a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^:/@\s]*):[^@/\s]*@/g;

/** s, a store URL or a key=value connection string, with every secret replaced by MASK. */
export function redact(s: string): string {
  if (s.includes('://')) {
    let u: URL | undefined;
    try { u = new URL(s); } catch { u = undefined; }
    if (u !== undefined) {
      if (u.password !== '') u.password = MASK;
      if (u.search !== '') u.search = u.search.replace(secretParam(), `$1$2${MASK}`);
      return u.toString();
    }
  }
  return redactText(s);
}

/** Free text that may quote connection strings, with every recognisable secret masked. */
export function redactText(msg: string): string {
  return msg.replace(userinfoPassword(), `$1:${MASK}@`).replace(secretParam(), `$1$2${MASK}`);
}

/** The literal secrets conn carries, so a message quoting one out of context is cleaned too. */
export function secrets(conn: string): string[] {
  const out: string[] = [];
  const add = (v: string) => {
    v = v.replace(/^['"]+|['"]+$/g, '');
    if (v !== '') out.push(v);
  };
  if (conn.includes('://')) {
    try {
      const u = new URL(conn);
      if (u.password !== '') add(decodeURIComponent(u.password));
      for (const [k, v] of u.searchParams) if (/^(ssl)?password$/i.test(k)) add(v);
    } catch { /* not a URL: the key=value scan below */ }
  }
  for (const m of conn.matchAll(secretParam())) {
    try { add(decodeURIComponent(m[3]!.replace(/\+/g, ' '))); } catch { /* not escaped */ }
    add(m[3]!);
  }
  return out;
}

/** msg without conn's secrets (literally, wherever they appear) and anything redactText masks. */
export function redactFor(msg: string, conn: string): string {
  for (const s of secrets(conn)) msg = msg.split(s).join(MASK);
  return redactText(msg);
}
