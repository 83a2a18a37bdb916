// Package agentsdk is what an agent pod links to take part in plan mode: it watches the pod's
// one AgentSession, answers "which plan state does this step use?" at every step boundary
// (asking the manager only when a selection is pending, docs/protocol.md), and appends the
// agent's own events to the session log with compare-and-swap.
package agentsdk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// FieldManager is the field manager the agent writes status.agent with.
const FieldManager = "planmode-agent"

// Options configure a Client.
type Options struct {
	// Config reaches the API server (in a pod: rest.InClusterConfig()).
	Config *rest.Config
	// Namespace and Name of the pod's AgentSession.
	Namespace, Name string
	// Store is the session log shared with the manager.
	Store sessionlog.Store
	// FieldManager overrides FieldManager (tests only).
	FieldManager string
	// SyncTimeout bounds the initial watch sync and the wait for the AgentSession to exist.
	// Default 30s.
	SyncTimeout time.Duration
	// Logger for watch problems; default discards.
	Logger logr.Logger
	// WatchTimeout is the shortest time the agent's two watches last before the API server
	// ends them and the agent watches again; each watch lasts between it and twice it, at
	// random. Zero keeps client-go's default, 5 minutes; less than 5 minutes is refused, as
	// client-go would not honour it. Thousands of agents each start two watches per timeout:
	// a longer one spreads fewer of them over the API server.
	WatchTimeout time.Duration
	// BoundaryWait is the longest a step boundary waits for the manager's answer before the
	// step proceeds under the committed state (protocol v2). Zero: DefaultBoundaryWait.
	BoundaryWait time.Duration
}

// MinWatchTimeout is the shortest Options.WatchTimeout: client-go's floor for a reflector's
// watch timeout.
const MinWatchTimeout = 5 * time.Minute

type configEntry struct {
	generation int64
	section    string
	// deleted: the config is gone; section is the last text seen, kept as the guidance of
	// plan-mode steps until it is back.
	deleted bool
}

// Client is one agent's view of its AgentSession and session log. Boundary and the append
// helpers are meant for the agent's one loop goroutine; the watch runs in the background.
type Client struct {
	ns, name     string
	fieldManager string
	store        sessionlog.Store
	writer       client.Client
	log          logr.Logger
	sessionID    string
	cancel       context.CancelFunc
	stopped      chan struct{}
	boundaryWait time.Duration

	mu      sync.Mutex
	obj     *v1alpha1.AgentSession // the informer's object: read only, never mutated
	configs map[string]configEntry // PlanModeConfigs of the namespace, by name
	changed chan struct{}          // closed and replaced on every watched change

	// Loop state (one goroutine).
	next     int64 // the seq the next append must carry, as far as this client knows
	stepOpen bool
	resumed  bool // the log held a request/header before this process's first request
	headers  HeaderTracker
	// steerDone is the last message id recorded in the log by this process; steerUnacked is
	// set while status.agent.steerID does not say so yet (retried at the next StartStep).
	steerDone    string
	steerUnacked bool
	// reported is the last boundary this process reported (status.agent.boundary as sent).
	reported *v1alpha1.StepBoundary
}

// New starts the watch on the AgentSession namespace/name (and the namespace's
// PlanModeConfigs), waits until it has synced and the AgentSession exists, and reads the log
// tail once. Close stops the watch.
func New(ctx context.Context, o Options) (*Client, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	writer, c, err := newClientAndCache(o)
	if err != nil {
		return nil, err
	}
	cl := &Client{
		ns: o.Namespace, name: o.Name, fieldManager: o.FieldManager, store: o.Store,
		writer: writer, log: o.Logger, configs: map[string]configEntry{}, boundaryWait: o.BoundaryWait,
		changed: make(chan struct{}), stopped: make(chan struct{}),
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cl.cancel = cancel
	fail := func(err error) (*Client, error) {
		cancel()
		<-cl.stopped
		return nil, err
	}
	synced, err := cl.addHandlers(runCtx, c)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(cl.stopped)
		if err := c.Start(runCtx); err != nil {
			cl.log.Error(err, "agent session watch stopped", "namespace", o.Namespace, "name", o.Name)
		}
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, o.SyncTimeout)
	defer syncCancel()
	// Synced handlers, not only the cache: the initial list reaches the handlers asynchronously.
	if !c.WaitForCacheSync(syncCtx) || !toolscache.WaitForCacheSync(syncCtx.Done(), synced...) {
		return fail(fmt.Errorf("agentsdk: watch on AgentSession %s/%s did not sync within %s", o.Namespace, o.Name, o.SyncTimeout))
	}
	if err := cl.start(ctx); err != nil {
		return fail(err)
	}
	return cl, nil
}

// complete checks o and fills in its defaults.
func (o *Options) complete() error {
	if o.Config == nil || o.Store == nil {
		return errors.New("agentsdk: Options.Config and Options.Store are required")
	}
	if o.Namespace == "" || o.Name == "" {
		return errors.New("agentsdk: Options.Namespace and Options.Name name the pod's AgentSession; both are required")
	}
	if o.FieldManager == "" {
		o.FieldManager = FieldManager
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 30 * time.Second
	}
	if o.BoundaryWait < 0 {
		return fmt.Errorf("agentsdk: Options.BoundaryWait is %s; use 0 (the default, %s) or a positive duration", o.BoundaryWait, DefaultBoundaryWait)
	}
	if o.BoundaryWait == 0 {
		o.BoundaryWait = DefaultBoundaryWait
	}
	if o.WatchTimeout != 0 && o.WatchTimeout < MinWatchTimeout {
		return fmt.Errorf("agentsdk: Options.WatchTimeout is %s; use 0 (client-go's default, %s) or at least %s", o.WatchTimeout, MinWatchTimeout, MinWatchTimeout)
	}
	return nil
}

// newClientAndCache builds the client the agent writes with and the cache that watches its
// AgentSession and the namespace's PlanModeConfigs, sharing one HTTP client.
func newClientAndCache(o Options) (client.Client, cache.Cache, error) {
	scheme, err := sdkScheme()
	if err != nil {
		return nil, nil, fmt.Errorf("agentsdk: scheme: %w", err)
	}
	cfg := rest.CopyConfig(o.Config)
	// The watches carry one small object per event; gzip saved nothing and cost a decompressor
	// per watch here (a large share of an agent's heap) and a compressor per watch on the API
	// server.
	cfg.DisableCompression = true
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("agentsdk: http client: %w", err)
	}
	mapper := sdkRESTMapper()
	writer, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, nil, fmt.Errorf("agentsdk: client: %w", err)
	}
	// One object, one namespace: the watch carries only this session's changes.
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		HTTPClient:        httpClient,
		Mapper:            mapper,
		DefaultNamespaces: map[string]cache.Config{o.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.AgentSession{}: {Field: fields.OneTermEqualSelector("metadata.name", o.Name)},
		},
		NewInformer: newInformer(o.WatchTimeout),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("agentsdk: cache: %w", err)
	}
	return writer, c, nil
}

// addHandlers feeds the cache's AgentSession and PlanModeConfig events to c; it returns the
// handlers' HasSynced functions.
func (c *Client) addHandlers(ctx context.Context, informers cache.Cache) ([]toolscache.InformerSynced, error) {
	sessInf, err := informers.GetInformer(ctx, &v1alpha1.AgentSession{})
	if err != nil {
		return nil, fmt.Errorf("agentsdk: informer: %w", err)
	}
	sessReg, err := sessInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.setSession(obj) },
		UpdateFunc: func(_, obj any) { c.setSession(obj) },
		DeleteFunc: func(any) { c.setSession(nil) },
	})
	if err != nil {
		return nil, fmt.Errorf("agentsdk: handler: %w", err)
	}
	cfgInf, err := informers.GetInformer(ctx, &v1alpha1.PlanModeConfig{})
	if err != nil {
		return nil, fmt.Errorf("agentsdk: informer: %w", err)
	}
	cfgReg, err := cfgInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.setConfig(obj, false) },
		UpdateFunc: func(_, obj any) { c.setConfig(obj, false) },
		DeleteFunc: func(obj any) { c.setConfig(obj, true) },
	})
	if err != nil {
		return nil, fmt.Errorf("agentsdk: handler: %w", err)
	}
	return []toolscache.InformerSynced{sessReg.HasSynced, cfgReg.HasSynced}, nil
}

// start takes the synced AgentSession's log position: the session must exist, and its log's
// tail sets where the client's appends go.
func (c *Client) start(ctx context.Context) error {
	// The list has been delivered to the handlers; the session must exist.
	obj, _ := c.snapshot()
	if obj == nil {
		return fmt.Errorf("%w: %s/%s", ErrSessionNotFound, c.ns, c.name)
	}
	c.sessionID = obj.Spec.SessionID
	if err := c.claimLog(ctx, obj); err != nil { // owner.go: one log per session
		return err
	}
	if err := c.seedFork(ctx, obj); err != nil {
		return err
	}
	t, err := c.store.Tail(ctx, c.sessionID)
	if err != nil {
		return fmt.Errorf("agentsdk: read log tail of session %q: %w", c.sessionID, err)
	}
	if err := c.checkLogStore(ctx, obj, t); err != nil { // logstore.go
		return err
	}
	c.next, c.stepOpen, c.resumed = t.NextSeq, t.StepOpen, t.LastShown != nil
	return c.withdrawStaleReview(ctx) // review.go
}

// seedFork seeds a forked session's log from its parent before the agent's first append, when
// the manager has not done it yet: the first append to an unknown session would create it
// without its parent. The store's compare-and-swap lets exactly one of the agent and the
// manager seed it; the other finds it done.
func (c *Client) seedFork(ctx context.Context, s *v1alpha1.AgentSession) error {
	f := s.Spec.Fork
	if f == nil {
		return nil
	}
	_, err := c.store.Info(ctx, c.sessionID)
	if err == nil {
		return nil // seeded already (or refused by the manager, which says why in the status)
	}
	if !errors.Is(err, sessionlog.ErrNotFound) {
		return fmt.Errorf("agentsdk: read session %q: %w", c.sessionID, err)
	}
	through := int64(-1)
	if f.ThroughSeq != nil {
		through = *f.ThroughSeq
	}
	owner := sessionlog.Owner{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}
	if _, err := c.store.Fork(ctx, f.SessionID, c.sessionID, through, owner); err != nil && !sessionlog.IsConflict(err) {
		// An *sessionlog.OwnershipError (a parent of another namespace) stops the agent: the
		// manager says the same with ForkRefused.
		return fmt.Errorf("agentsdk: seed session %q as a fork of %q (spec.fork): %w", c.sessionID, f.SessionID, err)
	}
	return nil
}

// sdkScheme is built once: every Client of a process reads the same kinds.
var sdkScheme = sync.OnceValues(func() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, v1alpha1.AddToScheme(s)
})

// sdkRESTMapper maps the only two kinds a Client touches. A discovery-backed mapper would send
// discovery requests from every agent at start and hold a copy of the API groups per agent (a
// large share of an agent's heap); these kinds and their scope are fixed by the CRDs.
func sdkRESTMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{v1alpha1.GroupVersion, corev1.SchemeGroupVersion})
	m.Add(v1alpha1.AgentSessionKind, meta.RESTScopeNamespace)
	m.Add(v1alpha1.GroupVersion.WithKind("PlanModeConfig"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace) // attached images (ImageData)
	return m
}

// Close stops the watch.
func (c *Client) Close() {
	c.cancel()
	<-c.stopped
}

// SessionID is the log session of the AgentSession (spec.sessionID).
func (c *Client) SessionID() string { return c.sessionID }

// Session returns the watched AgentSession (a copy), or nil when it was deleted.
func (c *Client) Session() *v1alpha1.AgentSession {
	obj, _ := c.snapshot()
	if obj == nil {
		return nil
	}
	return obj.DeepCopy()
}

func (c *Client) setSession(obj any) {
	s, _ := obj.(*v1alpha1.AgentSession)
	if s != nil && (s.Namespace != c.ns || s.Name != c.name) {
		return
	}
	c.mu.Lock()
	c.obj = s
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Client) setConfig(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*v1alpha1.PlanModeConfig)
	if !ok {
		return
	}
	c.mu.Lock()
	if deleted {
		e := c.configs[p.Name]
		c.configs[p.Name] = configEntry{section: e.section, deleted: true}
	} else if e, ok := c.configs[p.Name]; !ok || e.deleted || e.generation != p.Generation || p.Generation == 0 {
		c.configs[p.Name] = configEntry{generation: p.Generation, section: p.Spec.Section}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// snapshot returns the current object and a channel closed at the next change.
func (c *Client) snapshot() (*v1alpha1.AgentSession, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.obj, c.changed
}

// configInForce is the PlanModeConfig in force: the one the manager reports, else the one
// the spec asks for.
func configInForce(s *v1alpha1.AgentSession) string {
	if cfg := s.Status.PlanMode.Config; cfg != nil && cfg.Name != "" {
		return cfg.Name
	}
	return s.ConfigName()
}

func (c *Client) section(s *v1alpha1.AgentSession) (name, text string, ok bool) {
	name = configInForce(s)
	c.mu.Lock()
	e, ok := c.configs[name]
	c.mu.Unlock()
	return name, e.section, ok && !e.deleted
}

// WaitFor blocks until cond holds for the watched AgentSession (checked on every watched
// change) or ctx ends. cond must not modify the object. Tests and benchmarks use it to know a
// change has reached the agent.
func (c *Client) WaitFor(ctx context.Context, cond func(*v1alpha1.AgentSession) bool) error {
	for {
		s, changed := c.snapshot()
		if s != nil && cond(s) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for AgentSession %s/%s: %w", c.ns, c.name, ctx.Err())
		}
	}
}

// newInformer returns the cache's informer constructor: controller-runtime's own (nil) unless
// watchTimeout is set, when each watch asks the API server for a timeout between watchTimeout
// and twice it (the reflector's own choice is 5 to 10 minutes, and neither controller-runtime
// nor the informer lets it be set).
func newInformer(watchTimeout time.Duration) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	if watchTimeout == 0 {
		return nil
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		if l, ok := lw.(*toolscache.ListWatch); ok && l.WatchFuncWithContext != nil {
			next := l.WatchFuncWithContext
			l.WatchFuncWithContext = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				secs := int64((watchTimeout + rand.N(watchTimeout)) / time.Second)
				opts.TimeoutSeconds = &secs
				return next(ctx, opts)
			}
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
	}
}
