// The harness's notice texts (pkg/harness texts.go).
export const NOTICE_ON = 'The user switched this session to plan mode.';
export const NOTICE_OFF = 'The user switched this session back to the default mode.';
