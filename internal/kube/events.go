package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/podpatch/podpatch/internal/report"
)

// MaxEventMessage bounds every Event message podpatch writes, in bytes: the API server
// refuses an Event whose message is longer than 1024 bytes.
const MaxEventMessage = 1000

// Events is the process's one Event broadcaster: every component's recorder sends through it,
// so that Events are aggregated, rate-limited and written by one sink.
type Events struct {
	b record.EventBroadcaster
}

// NewEvents starts a broadcaster that writes Events with cs.
func NewEvents(cs kubernetes.Interface) *Events {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return &Events{b: b}
}

// Recorder returns a recorder whose Events say they come from component.
func (e *Events) Recorder(component string) *Recorder {
	return &Recorder{r: e.b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: component})}
}

// Shutdown stops the broadcaster; Events recorded after it are dropped.
func (e *Events) Shutdown() { e.b.Shutdown() }

// Recorder records Events with messages clipped to MaxEventMessage.
type Recorder struct {
	r record.EventRecorder
}

// NewRecorder wraps a recorder (tests: record.FakeRecorder).
func NewRecorder(r record.EventRecorder) *Recorder { return &Recorder{r: r} }

// Event records an Event on obj: a built-in object of client-go's scheme or a
// *corev1.ObjectReference, which may name any kind (a custom resource). Its message is
// clipped to MaxEventMessage bytes.
func (r *Recorder) Event(obj runtime.Object, typ, reason, msg string) {
	r.r.Event(obj, typ, reason, report.Clip(msg, MaxEventMessage))
}
