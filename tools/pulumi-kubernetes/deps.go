//go:build tools

// Package deps keeps the provider's packages in this module's requirements. The build
// script copies the provider's main package next to this file, generates its embedded
// schema there and builds it; that copy is not part of the repository.
package deps

import (
	_ "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	_ "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
	_ "github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)
