package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/deploy"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/manifests"
)

// Admission: translate reads objects no API server has seen, so it does to each
// custom resource what the API server does on a create, with the API server's own
// libraries and the CRDs a cluster of this release serves (deploy.CRDs): unknown
// fields are refused (kubectl's default, strict field validation), the schema's
// defaults are applied, and the object is validated by its structural schema, its
// list types, its metadata and its x-kubernetes-validations CEL rules. A refused
// object is left out of the judging, as an object the API server refused never
// reaches the controller; the others are judged as ever, like kubectl apply of a file
// of several objects.

// refusedError is an object the API server would refuse, with its answer.
type refusedError struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	err       error // the API server's answer: Invalid, or BadRequest for unknown fields
}

func (e *refusedError) Error() string { return e.err.Error() }

// crdVersion is one served version of one CRD; its validator is built the first time
// an object of that version is read, so a run compiles the CEL rules of the kinds it
// reads, once.
type crdVersion struct {
	namespaced bool
	validator  func() (*crdValidator, error)
}

// crdValidator is what the API server holds for one served version of a CRD.
type crdValidator struct {
	structural *structuralschema.Structural // defaults pruned as the API server prunes them
	schema     apiservervalidation.SchemaValidator
	rules      *cel.Validator // nil when the version has no x-kubernetes-validations
}

// crdFiles are the files of deploy.CRDs by base name, each read and indexed the first
// time a kind it serves is read: parsing all of them would cost a run more than
// compiling the rules of the kinds it reads.
var crdFiles = sync.OnceValues(func() (map[string]func() (map[schema.GroupVersionKind]*crdVersion, error), error) {
	files := map[string]func() (map[schema.GroupVersionKind]*crdVersion, error){}
	err := fs.WalkDir(deploy.CRDs, ".", func(file string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(file, ".yaml") {
			return err
		}
		files[path.Base(file)] = sync.OnceValues(func() (map[schema.GroupVersionKind]*crdVersion, error) {
			index := map[schema.GroupVersionKind]*crdVersion{}
			if err := indexCRDFile(deploy.CRDs, file, index); err != nil {
				return nil, fmt.Errorf("the CRDs built in (%s): %w", file, err)
			}
			return index, nil
		})
		return nil
	})
	return files, err
})

// crdFilePrefix begins the name of every file a CRD serving gvk may be in: files are
// named "<group>_<plural>.yaml" (controller-gen's and the Gateway API's names), and a
// plural begins with its kind, lower case, less a final y ("policy", "policies").
// More than one file may match ("gateway" begins "gatewayclasses" too): each is read
// until one serves gvk. TestCRDsAreFoundByTheirKinds holds every CRD built in to it.
func crdFilePrefix(gvk schema.GroupVersionKind) string {
	return gvk.Group + "_" + strings.TrimSuffix(strings.ToLower(gvk.Kind), "y")
}

// servedCRD is the CRD version of deploy.CRDs that serves gvk, if any.
func servedCRD(gvk schema.GroupVersionKind) (*crdVersion, bool, error) {
	files, err := crdFiles()
	if err != nil {
		return nil, false, err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasPrefix(name, crdFilePrefix(gvk)) {
			continue
		}
		index, err := files[name]()
		if err != nil {
			return nil, false, err
		}
		if version, ok := index[gvk]; ok {
			return version, true, nil
		}
	}
	return nil, false, nil
}

func indexCRDFile(fsys fs.FS, file string, index map[schema.GroupVersionKind]*crdVersion) error {
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return err
	}
	docs, err := manifests.Documents(data)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return err
		}
		if probe.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return err
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil {
				continue
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			index[gvk] = &crdVersion{
				namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
				validator:  sync.OnceValues(func() (*crdValidator, error) { return newCRDValidator(crd.Spec.PreserveUnknownFields, v.Schema) }),
			}
		}
	}
	return nil
}

// newCRDValidator builds what the API server builds to serve a CRD version
// (apiextensions-apiserver's customresource_handler): the structural schema with its
// defaults pruned, the OpenAPI schema validator and the compiled CEL rules.
func newCRDValidator(preserveUnknownFields bool, v1Schema *apiextensionsv1.CustomResourceValidation) (*crdValidator, error) {
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("convert the schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema is not structural: %w", err)
	}
	if preserveUnknownFields {
		return nil, errors.New("the CRD preserves unknown fields, which translate does not validate")
	}
	structural = structural.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(structural); err != nil {
		return nil, fmt.Errorf("prune the schema's defaults: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema validator: %w", err)
	}
	return &crdValidator{
		structural: structural,
		schema:     validator,
		rules:      cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// admit does to a document what the API server does to it on a create when it is a
// custom resource of deploy.CRDs, and returns the object as the API server would store
// it (defaulted), or a *refusedError. Any other document (a core kind, or one that is
// not an object at all) is returned as it is, for the decoder to read or refuse.
func admit(doc []byte) ([]byte, error) {
	data, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return doc, nil // the decoder says what is wrong with it
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return doc, nil
	}
	version, ok, err := servedCRD(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if !ok {
		return doc, nil
	}
	switch {
	case !version.namespaced:
		u.SetNamespace("") // the API server clears it on a cluster-scoped create
	case u.GetNamespace() == "":
		u.SetNamespace("default") // as kubectl sends it, and as translate reads it
	}
	v, err := version.validator()
	if err != nil {
		return nil, fmt.Errorf("the CRD of %s: %w", u.GroupVersionKind(), err)
	}
	if err := v.admit(u, version.namespaced); err != nil {
		return nil, &refusedError{gvk: u.GroupVersionKind(), namespace: u.GetNamespace(), name: u.GetName(), err: err}
	}
	return u.MarshalJSON()
}

// admit is the API server's decoding and create validation of one custom resource:
// unknown fields refused, nulls without defaults dropped, defaults applied; then the
// metadata, the schema, the list types and, when those leave nothing that blocks
// them, the CEL rules. It changes u to the object the API server would store.
func (v *crdValidator) admit(u *unstructured.Unstructured, namespaced bool) error {
	gvk := u.GroupVersionKind()
	unknown := pruning.PruneWithOptions(u.Object, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(unknown) > 0 {
		errs := make([]error, 0, len(unknown))
		for _, fieldPath := range unknown {
			errs = append(errs, fmt.Errorf(`unknown field "%s"`, fieldPath))
		}
		// The API server's answer to a strict create, word for word.
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, runtime.NewStrictDecodingError(errs)))
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, v.structural)
	structuraldefaulting.Default(u.Object, v.structural)

	// A create drops the status (the Gateway API kinds have a status subresource), so
	// only the rest is validated. A status in the input is kept, defaulted: translate
	// reads objects as a cluster holds them (kubectl get -o yaml), other controllers'
	// route parents included.
	obj := make(map[string]any, len(u.Object))
	for k, val := range u.Object {
		if k != "status" {
			obj[k] = val
		}
	}
	errs := metavalidation.ValidateObjectMetaAccessor(u, namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, v.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, obj, v.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	if v.rules != nil {
		if blocking := blockingErrors(errs); blocking != nil {
			errs = append(errs, blocking)
		} else {
			ruleErrs, _ := v.rules.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, ruleErrs...)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(gvk.GroupKind(), u.GetName(), errs)
	}
	return nil
}

// blockingErrors is the API server's note when errors of the schema stop it from
// running the CEL rules (an object of the wrong shape, or too large, cannot be judged
// by them), nil when the rules can run.
func blockingErrors(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}
