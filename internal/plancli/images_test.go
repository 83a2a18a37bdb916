package plancli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// writePNG writes a w x h PNG into dir and returns its path and bytes.
func writePNG(t *testing.T, dir, name string, w, h int) (string, []byte) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.NRGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, b.Bytes()), b.Bytes()
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func digest(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (c *cli) configMaps(t *testing.T) []corev1.ConfigMap {
	t.Helper()
	var l corev1.ConfigMapList
	if err := c.c.List(context.Background(), &l, client.InNamespace(testNS)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// kubectl plan message demo TEXT --image a.png --image b.gif: each image's bytes in a
// content-addressed ConfigMap owned by the session, the queued message naming them in order
// before its text, with the metadata the harness records.
func TestMessageWithImages(t *testing.T) {
	dir := t.TempDir()
	pngPath, pngData := writePNG(t, dir, "mockup.png", 3, 2)
	var g bytes.Buffer
	if err := gif.Encode(&g, image.NewPaletted(image.Rect(0, 0, 1, 4), []color.Color{color.White, color.Black}), nil); err != nil {
		t.Fatal(err)
	}
	gifPath := writeFile(t, dir, "tiny.gif", g.Bytes())

	as := toggled(false, true)
	as.UID = "uid-demo"
	c := newCLI(t, as, config(v1alpha1.DefaultPlanModeConfigName))
	c.images = []string{pngPath, gifPath}
	if err := c.toggle(context.Background(), "demo", true, "like this", nil); err != nil {
		t.Fatal(err)
	}
	q := c.read(t).Spec.SteerQueue
	if len(q) != 1 || q[0].Text != "like this" || len(q[0].Images) != 2 {
		t.Fatalf("spec.steerQueue %+v, want one message with the text and two images", q)
	}
	want := v1alpha1.ImageAttachment{AttachmentID: digest(pngData), MediaType: "image/png", Width: 3, Height: 2, Bytes: int64(len(pngData)), Name: "mockup.png"}
	if q[0].Images[0] != want {
		t.Errorf("first image %+v, want %+v", q[0].Images[0], want)
	}
	if im := q[0].Images[1]; im.MediaType != "image/gif" || im.Width != 1 || im.Height != 4 || im.Name != "tiny.gif" {
		t.Errorf("second image %+v, want the 1x4 GIF", im)
	}
	cms := c.configMaps(t)
	if len(cms) != 2 {
		t.Fatalf("%d ConfigMaps, want one per image", len(cms))
	}
	cm := &corev1.ConfigMap{}
	if err := c.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: v1alpha1.ImageConfigMapName(want.AttachmentID)}, cm); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cm.BinaryData[v1alpha1.ImageDataKey], pngData) {
		t.Errorf("ConfigMap %s does not hold the image's bytes", cm.Name)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != "uid-demo" || cm.OwnerReferences[0].Kind != "AgentSession" {
		t.Errorf("owners %+v, want the session", cm.OwnerReferences)
	}
	if cm.Immutable == nil || !*cm.Immutable {
		t.Error("the image's ConfigMap is not immutable")
	}
	if !strings.Contains(c.out.String(), "Message queued for the agent's next step") {
		t.Errorf("reply: %q", c.out.String())
	}
}

// kubectl plan on demo --image a.png: an image-only message, as bare /plan with an image.
func TestOnWithAnImageSendsAnImageOnlyMessage(t *testing.T) {
	p, _ := writePNG(t, t.TempDir(), "a.png", 1, 1)
	c := newCLI(t, toggled(false, false), config(v1alpha1.DefaultPlanModeConfigName))
	c.images = []string{p}
	if err := c.toggle(context.Background(), "demo", true, "", nil); err != nil {
		t.Fatal(err)
	}
	as := c.read(t)
	if q := as.Spec.SteerQueue; len(q) != 1 || q[0].Text != "" || len(q[0].Images) != 1 {
		t.Fatalf("spec.steerQueue %+v, want one image-only message", q)
	}
	if a := as.Spec.PlanMode.Active; a == nil || !*a {
		t.Errorf("spec.planMode.active %v, want true", a)
	}
}

// kubectl plan off demo --image a.png fails with the harness's text and changes nothing.
func TestOffWithImagesIsRefused(t *testing.T) {
	p, _ := writePNG(t, t.TempDir(), "a.png", 1, 1)
	as := toggled(true, false)
	c := newCLI(t, as)
	before := c.read(t)
	c.images = []string{p}
	err := c.toggle(context.Background(), "demo", false, "", nil)
	if err == nil || err.Error() != "Image attachments cannot accompany kubectl plan off." {
		t.Fatalf("error %v, want the harness's refusal", err)
	}
	after := c.read(t)
	if after.ResourceVersion != before.ResourceVersion || len(c.configMaps(t)) != 0 || c.out.Len() != 0 {
		t.Errorf("a refused off changed something: resourceVersion %s -> %s, %d ConfigMaps, output %q",
			before.ResourceVersion, after.ResourceVersion, len(c.configMaps(t)), c.out.String())
	}
}

// Bad files are refused before anything is written, naming the file and the fix.
func TestBadImagesAreRefusedBeforeAnyWrite(t *testing.T) {
	dir := t.TempDir()
	wide, _ := writePNG(t, dir, "wide.png", v1alpha1.MaxImageDimension+1, 1)
	ok, okData := writePNG(t, dir, "ok.png", 1, 1)
	big := writeFile(t, dir, "big.png", append(append([]byte{}, okData...), make([]byte, v1alpha1.MaxImageBytes)...))
	damaged := writeFile(t, dir, "damaged.png", okData[:len(okData)-20])
	many := make([]string, v1alpha1.MaxImagesPerMessage+1)
	for i := range many {
		many[i] = ok
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"not an image", []string{writeFile(t, dir, "notes.txt", []byte("hello"))}, "--image " + dir + "/notes.txt: not a PNG, JPEG, WebP or GIF image"},
		{"missing", []string{dir + "/nope.png"}, "--image " + dir + "/nope.png: stat"},
		{"too wide", []string{wide}, "pixels; an attached image has at most 2000 pixels a side: scale it down"},
		{"too large", []string{big}, "bytes; an attached image holds at most 1024000 bytes"},
		{"damaged", []string{damaged}, "--image " + damaged + ": the png image is damaged"},
		{"too many", many, "--image: 21 images; a message carries at most 20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t, toggled(false, false))
			before := c.read(t)
			c.images = tc.paths
			err := c.toggle(context.Background(), "demo", true, "look", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if c.read(t).ResourceVersion != before.ResourceVersion || len(c.configMaps(t)) != 0 {
				t.Error("a refused image changed the session or stored a ConfigMap")
			}
		})
	}
}

// An image another session attached is shared: this session becomes an owner too. An object
// of the image's name holding other bytes is refused, and the message is not queued.
func TestImageConfigMapSharedOrForeign(t *testing.T) {
	p, data := writePNG(t, t.TempDir(), "a.png", 2, 2)
	name := v1alpha1.ImageConfigMapName(digest(data))
	other := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentSession", Name: "other", UID: "uid-other"}
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, OwnerReferences: []metav1.OwnerReference{other}},
		BinaryData: map[string][]byte{v1alpha1.ImageDataKey: data}}
	as := toggled(false, false)
	as.UID = "uid-demo"
	c := newCLI(t, as, shared)
	c.images = []string{p}
	if err := c.toggle(context.Background(), "demo", true, "", nil); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := c.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.OwnerReferences) != 2 || cm.OwnerReferences[1].UID != "uid-demo" {
		t.Errorf("owners %+v, want the other session and this one", cm.OwnerReferences)
	}

	foreign := shared.DeepCopy()
	foreign.ResourceVersion = ""
	foreign.BinaryData = map[string][]byte{v1alpha1.ImageDataKey: []byte("something else")}
	c = newCLI(t, toggled(false, false), foreign)
	before := c.read(t)
	c.images = []string{p}
	err := c.toggle(context.Background(), "demo", true, "look", nil)
	if err == nil || !strings.Contains(err.Error(), "exists but does not hold the image a.png") {
		t.Fatalf("error %v, want the foreign ConfigMap refused", err)
	}
	if c.read(t).ResourceVersion != before.ResourceVersion {
		t.Error("the message was queued although its image could not be stored")
	}
}
