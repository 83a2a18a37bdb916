package framework

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ClusterRoles are the ClusterRoles config/rbac defines, as written (not kustomized), ready to
// create: the suites that check RBAC give their identities the roles users install.
func ClusterRoles() ([]rbacv1.ClusterRole, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "rbac", "*.yaml"))
	if err != nil {
		return nil, err
	}
	var roles []rbacv1.ClusterRole
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var role rbacv1.ClusterRole
			if err := dec.Decode(&role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if role.Kind == "ClusterRole" {
				role.ResourceVersion = ""
				roles = append(roles, role)
			}
		}
	}
	return roles, nil
}
