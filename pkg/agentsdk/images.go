package agentsdk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// ImageData reads the bytes of an image attached to a user message (`kubectl plan message
// --image`), for an agent that passes images to its model. It reads the image's ConfigMap
// once, on demand, and checks the bytes against the content address, so a replaced object is
// an error rather than another image. The agent needs "get" on configmaps
// (config/rbac/agentsession_agent_images_role.yaml).
func (c *Client) ImageData(ctx context.Context, img v1alpha1.ImageAttachment) ([]byte, error) {
	name := v1alpha1.ImageConfigMapName(img.AttachmentID)
	cm := &corev1.ConfigMap{}
	if err := c.writer.Get(ctx, types.NamespacedName{Namespace: c.ns, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("read image %s (ConfigMap %s/%s): %w", img.AttachmentID, c.ns, name, err)
	}
	data := cm.BinaryData[v1alpha1.ImageDataKey]
	if sum := sha256.Sum256(data); "sha256:"+hex.EncodeToString(sum[:]) != img.AttachmentID {
		return nil, fmt.Errorf("ConfigMap %s/%s does not hold image %s (its bytes have another digest)", c.ns, name, img.AttachmentID)
	}
	return data, nil
}
