// Package harness is the session-log vocabulary of the DeepSeek harness that plan mode reads
// and writes, with no I/O: the event envelope, the event types and their payloads, what makes
// an event valid, the Tail fold over a log, and the harness's exact plan-mode texts.
//
// pkg/sessionlog stores these events, pkg/planmode decides with them, and the manager, the
// agent SDK, the reference agent and the kubectl plugin all speak this one vocabulary.
//
// Provenance: the payload shapes, the validation rules and the texts are the DeepSeek
// harness's own (its session event declarations, createUserMessage's key order and its
// plan-mode plugin's strings), copied verbatim so that a log written here reads the same as
// one the harness wrote. Tests pin the texts and the bytes of every payload; changing one is
// a protocol change, not a wording change.
package harness
