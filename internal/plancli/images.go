package plancli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	_ "image/gif"  // registers GIF for image.Decode
	_ "image/jpeg" // registers JPEG
	_ "image/png"  // registers PNG
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	_ "golang.org/x/image/webp" // registers WebP
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// ImagesWithOffError is the harness's refusal of /plan off with images, in kubectl's words
// (a sentence, as the harness prints it).
type ImagesWithOffError struct{}

func (ImagesWithOffError) Error() string {
	return "Image attachments cannot accompany kubectl plan off."
}

// Labels of the ConfigMap holding an attached image.
const (
	labelAttachment = "agents.harness.dev/attachment"
	labelManagedBy  = "app.kubernetes.io/managed-by"
)

func addImageFlag(cmd *cobra.Command, paths *[]string) {
	cmd.Flags().StringArrayVar(paths, "image", nil, fmt.Sprintf(
		"Attach an image file (PNG, JPEG, WebP or GIF, at most %d KiB and %d pixels a side) to the message; repeat for more (at most %d). "+
			"Its bytes go into a ConfigMap owned by the session; needs create and update on configmaps",
		v1alpha1.MaxImageBytes/1024, v1alpha1.MaxImageDimension, v1alpha1.MaxImagesPerMessage))
}

// attachedImage is one --image file, read and checked before anything is written.
type attachedImage struct {
	ref  v1alpha1.ImageAttachment
	data []byte
}

// formatMediaTypes maps image.Decode's format names to the media types the harness accepts.
var formatMediaTypes = map[string]string{"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}

// readImages reads and checks every --image file: a format the harness accepts, within the
// size and dimension limits, decodable to the end (as the harness decodes an upload before
// storing it). Any failure names the file and the fix, and nothing has been written yet.
func readImages(paths []string) ([]attachedImage, error) {
	if len(paths) > v1alpha1.MaxImagesPerMessage {
		return nil, fmt.Errorf("--image: %d images; a message carries at most %d: send the rest in another message", len(paths), v1alpha1.MaxImagesPerMessage)
	}
	out := make([]attachedImage, 0, len(paths))
	for _, p := range paths {
		img, err := readImage(p)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

func readImage(path string) (attachedImage, error) {
	info, err := os.Stat(path)
	if err != nil {
		return attachedImage{}, fmt.Errorf("--image %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return attachedImage{}, fmt.Errorf("--image %s: not a regular file: name an image file", path)
	}
	if info.Size() > v1alpha1.MaxImageBytes {
		return attachedImage{}, fmt.Errorf("--image %s: %d bytes; an attached image holds at most %d bytes (its ConfigMap must stay under 1 MiB): shrink or crop it",
			path, info.Size(), v1alpha1.MaxImageBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return attachedImage{}, fmt.Errorf("--image %s: %w", path, err)
	}
	if len(data) == 0 {
		return attachedImage{}, fmt.Errorf("--image %s: the file is empty: name an image file", path)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	mediaType, ok := formatMediaTypes[format]
	if err != nil || !ok {
		return attachedImage{}, fmt.Errorf("--image %s: not a PNG, JPEG, WebP or GIF image (the formats the agent accepts): convert it to PNG", path)
	}
	if cfg.Width > v1alpha1.MaxImageDimension || cfg.Height > v1alpha1.MaxImageDimension {
		return attachedImage{}, fmt.Errorf("--image %s: %dx%d pixels; an attached image has at most %d pixels a side: scale it down",
			path, cfg.Width, cfg.Height, v1alpha1.MaxImageDimension)
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return attachedImage{}, fmt.Errorf("--image %s: the %s image is damaged (%v): export it again", path, format, err)
	}
	sum := sha256.Sum256(data)
	return attachedImage{
		ref: v1alpha1.ImageAttachment{
			AttachmentID: "sha256:" + hex.EncodeToString(sum[:]),
			MediaType:    mediaType,
			Width:        int32(cfg.Width),  //nolint:gosec // at most MaxImageDimension
			Height:       int32(cfg.Height), //nolint:gosec // at most MaxImageDimension
			Bytes:        int64(len(data)),
			Name:         filepath.Base(path),
		},
		data: data,
	}, nil
}

func imageRefs(imgs []attachedImage) []v1alpha1.ImageAttachment {
	if len(imgs) == 0 {
		return nil
	}
	refs := make([]v1alpha1.ImageAttachment, len(imgs))
	for i := range imgs {
		refs[i] = imgs[i].ref
	}
	return refs
}

// storeImages puts each image's bytes in its content-addressed ConfigMap, owned by the
// session so it goes when the session goes. An image another message or session attached
// already is shared: the session is added to its owners. An object of that name whose bytes
// are not the image's is refused, never overwritten.
func (o *Options) storeImages(ctx context.Context, as *v1alpha1.AgentSession, imgs []attachedImage) error {
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentSession", Name: as.Name, UID: as.UID}
	for _, img := range imgs {
		name := v1alpha1.ImageConfigMapName(img.ref.AttachmentID)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: as.Namespace,
				Labels:          map[string]string{labelAttachment: "image", labelManagedBy: FieldManager},
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			BinaryData: map[string][]byte{v1alpha1.ImageDataKey: img.data},
			Immutable:  new(true),
		}
		err := o.c.Create(ctx, cm)
		if err == nil {
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return o.explainImage(err, img.ref.Name, name)
		}
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			have := &corev1.ConfigMap{}
			if err := o.c.Get(ctx, types.NamespacedName{Namespace: as.Namespace, Name: name}, have); err != nil {
				return err
			}
			if sum := sha256.Sum256(have.BinaryData[v1alpha1.ImageDataKey]); "sha256:"+hex.EncodeToString(sum[:]) != img.ref.AttachmentID {
				return fmt.Errorf("ConfigMap %s/%s exists but does not hold the image %s (its %q bytes differ): delete it or rename it, then send again",
					as.Namespace, name, img.ref.Name, v1alpha1.ImageDataKey)
			}
			if slices.ContainsFunc(have.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == as.UID }) {
				return nil
			}
			have.OwnerReferences = append(have.OwnerReferences, owner)
			return o.c.Update(ctx, have, client.FieldOwner(FieldManager))
		})
		if err != nil {
			return o.explainImage(err, img.ref.Name, name)
		}
	}
	return nil
}

func (o *Options) explainImage(err error, file, cm string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("not allowed to store the image %s in ConfigMap %s/%s: --image needs create, get and update on configmaps in the namespace "+
			"(ask for them, or send the message without images): %s", file, o.ns, cm, apiMessage(err))
	}
	return fmt.Errorf("store the image %s in ConfigMap %s/%s: %w", file, o.ns, cm, err)
}
