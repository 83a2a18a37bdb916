package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// statusPatcher is the one writer of the manager's part of an AgentSession's status
// (observedGeneration, planMode, review, conditions), and the one judge of how fresh the
// session a reconcile decides on is. It remembers, per session, a digest of the manager-owned
// status this process last wrote, or last found to match the log when it had written none.
//
// Nothing else writes those fields: the admission webhook keeps them the manager's, and leader
// election keeps one manager. So:
//   - a cached session that shows the remembered status is the newest as far as the manager's
//     decisions go (a user's spec change the cache has not shown yet is taken on next, as if it
//     came just after), and its write is a merge patch of the changed fields with no
//     precondition: it cannot undo a write it has not seen, and never conflicts with the
//     agent's status.agent or a user's spec;
//   - a cached session that shows another status lags this process's own write (or another
//     writer changed the fields): one live read replaces it before anything is decided;
//   - with nothing remembered (the first reconcile after a start), the session is read live
//     before an append is decided on it, and its write carries the resourceVersion it was
//     read at.
//
// A write carrying a resourceVersion is refused by the API server with 409 Conflict when
// anything changed since the read. The write is stale (errStaleStatus: the reconcile computes
// again from the newer object) only when the manager-owned status changed; a change of the
// spec or of status.agent alone is sent the same write again on the live object.
type statusPatcher struct {
	client client.Client
	// live reads past the cache; nil trusts the cache (tests that drive compute alone), and
	// the read after a conflict then goes through client.
	live client.Reader

	// memory holds the digest of the manager-owned status remembered per session.
	memory *sessionMemory
}

// errStaleStatus is a status computed from an object whose manager-owned status is older than
// the stored one: nothing was written.
var errStaleStatus = errors.New("the manager-owned status changed since it was read")

// conflictRetries bounds how often one write is sent again after a conflict that left the
// manager-owned status unchanged (the agent or a user writing meanwhile).
const conflictRetries = 3

// basis returns the session to compute from, and whether it is known to be the newest as far
// as the manager's decisions go: the cached one when it shows the remembered status (or none
// is remembered: then not known), else one read live.
func (p *statusPatcher) basis(ctx context.Context, cached *agentsv1alpha1.AgentSession) (*agentsv1alpha1.AgentSession, bool, error) {
	key := client.ObjectKeyFromObject(cached)
	d, ok := p.remembered(key)
	switch {
	case !ok || p.live == nil:
		return cached, false, nil
	case d == digestStatus(&cached.Status):
		return cached, true, nil
	}
	var live agentsv1alpha1.AgentSession
	if err := p.live.Get(ctx, key, &live); err != nil {
		return nil, false, fmt.Errorf("read AgentSession %s past the cache: %w", key, err)
	}
	return &live, true, nil
}

// newer reads the session live and returns it when it is newer than s (nil when s is the
// API server's newest): an append must not be decided on a session the cache has not caught
// up with (a selection already decided, or one already taken on).
func (p *statusPatcher) newer(ctx context.Context, s *agentsv1alpha1.AgentSession) (*agentsv1alpha1.AgentSession, error) {
	if p.live == nil {
		return nil, nil
	}
	key := client.ObjectKeyFromObject(s)
	var live agentsv1alpha1.AgentSession
	if err := p.live.Get(ctx, key, &live); err != nil {
		return nil, fmt.Errorf("read AgentSession %s before appending: %w", key, err)
	}
	if live.ResourceVersion != s.ResourceVersion {
		return &live, nil
	}
	return nil, nil
}

// unchangedSince reports whether status shows the manager-owned status remembered for the
// session: this process wrote it, or found it to match the log.
func (p *statusPatcher) unchangedSince(key types.NamespacedName, status *agentsv1alpha1.AgentSessionStatus) bool {
	d, ok := p.remembered(key)
	return ok && d == digestStatus(status)
}

// checked remembers a status a whole reconcile found to match the log (no write was due), when
// nothing is remembered: after a restart, the next echo of an unchanged session then settles
// without reading the log. Not over a remembered one: a difference means the cache may lag this
// process's own write.
func (p *statusPatcher) checked(key types.NamespacedName, status *agentsv1alpha1.AgentSessionStatus) {
	p.memory.rememberStatus(key, digestStatus(status), true)
}

// patch writes status (its manager-owned part; status.agent stays the basis's) over basis, the
// session it was computed from: with no precondition when basis shows the remembered status,
// else with basis's resourceVersion. errStaleStatus means nothing was written.
func (p *statusPatcher) patch(ctx context.Context, basis *agentsv1alpha1.AgentSession, status agentsv1alpha1.AgentSessionStatus) error {
	key := client.ObjectKeyFromObject(basis)
	owned, err := ownedJSON(&status)
	if err != nil {
		return err
	}
	precondition := ""
	if !p.unchangedSince(key, &basis.Status) {
		precondition = basis.ResourceVersion
	}
	if err := p.send(ctx, basis, &status, owned, precondition); err != nil {
		return err
	}
	// What the server now stores: the patch took the stored manager-owned status from basis's
	// (the precondition, or this process's own last write) to exactly this.
	p.memory.rememberStatus(key, digestOf(owned), false)
	return nil
}

// send writes the patch from basis's manager-owned status to status's (owned is its JSON),
// with precondition as the resourceVersion when set; after a conflict it sends the same status
// again over the live object while that object's manager-owned status is basis's.
func (p *statusPatcher) send(ctx context.Context, basis *agentsv1alpha1.AgentSession, status *agentsv1alpha1.AgentSessionStatus, owned []byte, precondition string) error {
	key := client.ObjectKeyFromObject(basis)
	reader := p.live
	if reader == nil {
		reader = p.client
	}
	for attempt := 0; ; attempt++ {
		data, err := statusPatch(&basis.Status, status, owned, precondition)
		if err != nil {
			return err
		}
		// The answer is read as metadata: its status says nothing the patch does not.
		err = p.client.Status().Patch(ctx, agentsv1alpha1.AgentSessionMetadata(basis.Namespace, basis.Name), client.RawPatch(types.MergePatchType, data), client.FieldOwner(FieldManager))
		if precondition == "" || !apierrors.IsConflict(err) {
			return err
		}
		var live agentsv1alpha1.AgentSession
		if err := reader.Get(ctx, key, &live); err != nil {
			return fmt.Errorf("read AgentSession %s after a conflict: %w", key, err)
		}
		if digestStatus(&live.Status) != digestStatus(&basis.Status) || attempt == conflictRetries {
			return errStaleStatus
		}
		basis, precondition = &live, live.ResourceVersion
	}
}

// statusPatch is the body of a status write: a JSON merge patch from the manager-owned part of
// basis to owned (status's, as JSON), diffed over those two alone rather than over two whole
// objects, carrying precondition as metadata.resourceVersion when set. It always carries
// status.planMode.active and .pending: on a fresh session both are false, basis shows them
// false too, and a diff alone would never write them, so kubectl get's Plan-Mode column would
// stay empty instead of saying false (off) once the manager has seen the session.
func statusPatch(basis, status *agentsv1alpha1.AgentSessionStatus, owned []byte, precondition string) ([]byte, error) {
	from := *basis
	from.Agent = nil
	// The opposite values put both in the diff, with status's values.
	from.PlanMode.Active, from.PlanMode.Pending = !status.PlanMode.Active, !status.PlanMode.Pending
	fromJSON, err := json.Marshal(&from)
	if err != nil {
		return nil, fmt.Errorf("encode the stored status: %w", err)
	}
	diff, err := jsonpatch.CreateMergePatch(fromJSON, owned)
	if err != nil {
		return nil, fmt.Errorf("diff the status: %w", err)
	}
	body := statusPatchBody{Status: diff}
	if precondition != "" {
		body.Metadata = &patchPrecondition{ResourceVersion: precondition}
	}
	return json.Marshal(&body)
}

type statusPatchBody struct {
	Metadata *patchPrecondition `json:"metadata,omitempty"`
	Status   json.RawMessage    `json:"status"`
}

type patchPrecondition struct {
	ResourceVersion string `json:"resourceVersion"`
}

func (p *statusPatcher) remembered(key types.NamespacedName) (statusDigest, bool) {
	return p.memory.status(key)
}

// writeDue reports whether the computed status differs from the stored one. The fields that
// mirror the log's position (nextSeq, turnOpen, toldActive) alone never make a write due: they
// move with every event the agent appends, and writing them would cost an API write per agent
// event. They are refreshed with every write made for another reason.
// stored and computed are the caller's copies, and planMode is held by value: the fields are
// masked here without copying anything they point to.
//
// Most computed statuses equal the stored one field for field (a restart computes one per
// session), which reflect.DeepEqual tells cheaply; the semantic comparison calls its time
// comparison through reflection. Equal field for field is semantically equal; only the rest,
// such as one instant in two time zones, needs it.
func writeDue(stored, computed agentsv1alpha1.AgentSessionStatus) bool {
	for _, s := range []*agentsv1alpha1.AgentSessionStatus{&stored, &computed} {
		s.PlanMode.NextSeq = 0
		s.PlanMode.TurnOpen = false
		s.PlanMode.ToldActive = nil
	}
	return !reflect.DeepEqual(&stored, &computed) && !equality.Semantic.DeepEqual(&stored, &computed)
}

// statusDigest identifies the manager-owned part of a status (observedGeneration, planMode,
// review, conditions) by a truncated SHA-256 of its JSON: a digest rather than a copy, since
// one is kept per session. A status the manager computed and the same status decoded from the
// API server's JSON encode equally: every field is a plain value, a pointer, a slice or a
// metav1.Time (which encodes to the second, as the server stores it), and the schema defaults
// nothing.
type statusDigest [16]byte

func digestStatus(s *agentsv1alpha1.AgentSessionStatus) statusDigest {
	b, _ := ownedJSON(s) // plain fields, pointers and metav1.Time: cannot fail
	return digestOf(b)
}

// ownedJSON is the manager-owned part of s as JSON: s without status.agent, the agent's part,
// whose writes never make the manager's write stale.
func ownedJSON(s *agentsv1alpha1.AgentSessionStatus) ([]byte, error) {
	owned := *s
	owned.Agent = nil
	b, err := json.Marshal(&owned)
	if err != nil {
		return nil, fmt.Errorf("encode the status: %w", err)
	}
	return b, nil
}

func digestOf(owned []byte) statusDigest {
	sum := sha256.Sum256(owned)
	return statusDigest(sum[:16])
}
