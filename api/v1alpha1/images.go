package v1alpha1

import "strings"

// Limits of an image attached to a user message. A ConfigMap holds at most 1 MiB, so one
// image's bytes must fit beside its key; the dimension cap is the harness's default.
const (
	MaxImageBytes       = 1024000
	MaxImageDimension   = 2000
	MaxImagesPerMessage = 20
)

// ImageDataKey is the binaryData key holding an image's bytes in its ConfigMap.
const ImageDataKey = "image"

// ImageConfigMapName is the ConfigMap, in the session's namespace, holding the bytes of the
// image with content address attachmentID ("sha256:<hex>"). Content addressing lets every
// message and session attaching the same image share one object.
func ImageConfigMapName(attachmentID string) string {
	return "plan-image-" + strings.TrimPrefix(attachmentID, "sha256:")
}
