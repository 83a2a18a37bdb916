package v1alpha1

import (
	"fmt"
	"strconv"
)

// AnnotationAdoptLogStore is the annotation that, set to "<storeID>:<nextSeq>" (the values a
// LogStoreMismatch condition names), tells the manager and the agent that the session's log now lives in that
// store at that end, on purpose: the status is re-recorded against it and the selection in
// spec is committed there again. It matches only that store at that end, so a later
// replacement or rewind is detected again.
const AnnotationAdoptLogStore = "agents.harness.dev/adopt-log-store"

// LogStoreMismatch refuses a store with identity storeID, whose log of this session ends at
// logEnd (its next seq), that is not the one the status was recorded against, saying why and
// how to adopt it; nil when it is, when the status records nothing yet, or when
// AnnotationAdoptLogStore adopts exactly it.
// storeID "" (unknown) skips the identity check.
func (s *AgentSession) LogStoreMismatch(storeID string, logEnd int64) error {
	pm := s.Status.PlanMode
	if s.Annotations[AnnotationAdoptLogStore] == AdoptLogStoreValue(storeID, logEnd) && storeID != "" {
		return nil
	}
	var why string
	switch {
	case storeID != "" && pm.StoreID != "" && pm.StoreID != storeID:
		why = fmt.Sprintf("the session log store has identity %s, but this session's status was recorded against store %s: the store was replaced, recreated or its file deleted", storeID, pm.StoreID)
	case logEnd < pm.NextSeq:
		why = fmt.Sprintf("session %q ends at seq %d in the log store, before seq %d its status recorded: the store was emptied or restored from an older backup", s.Spec.SessionID, logEnd, pm.NextSeq)
	default:
		return nil
	}
	return fmt.Errorf("%s; nothing is appended until the right store is back, or, to continue on this one, `kubectl annotate agentsession %s %s=%s --overwrite` (docs/operations.md)",
		why, s.Name, AnnotationAdoptLogStore, AdoptLogStoreValue(storeID, logEnd))
}

// AdoptLogStoreValue is the AnnotationAdoptLogStore value that adopts store storeID at logEnd.
func AdoptLogStoreValue(storeID string, logEnd int64) string {
	return storeID + ":" + strconv.FormatInt(logEnd, 10)
}
