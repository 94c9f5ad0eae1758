// Command function-compose-vms is the composition function of
// `make crossplane-e2e` (hack/crossplane/run.sh): a Composition pipeline
// step that composes `spec.count` ProxmoxVMs for a composite resource,
// each the step input's `template` with `spec.forProvider.vmid` set to
// `spec.vmidBase` + its index. Each composed VM is reported ready when its
// own Ready condition is True, so the composite is Ready when all are.
//
// It exists because the usual generic function (function-patch-and-transform)
// cannot be fetched as a Go module here; any function that emits the same
// ProxmoxVMs would do (docs/install.md shows the Composition).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/crossplane/function-sdk-go"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Function composes the VMs.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

// RunFunction answers one pipeline step: the XR's VMs as desired resources.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the composite resource: %w", err))
		return rsp, nil
	}
	count, err := xr.Resource.GetInteger("spec.count")
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("spec.count: %w", err))
		return rsp, nil
	}
	if count < 0 || count > 100 {
		response.Fatal(rsp, fmt.Errorf("spec.count is %d, not 0..100", count))
		return rsp, nil
	}
	base, err := xr.Resource.GetInteger("spec.vmidBase")
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("spec.vmidBase: %w", err))
		return rsp, nil
	}
	input := &unstructured.Unstructured{}
	if err := request.GetInput(req, input); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the step input: %w", err))
		return rsp, nil
	}
	template, ok, err := unstructured.NestedMap(input.Object, "template")
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("the step input's template: %w", err))
		return rsp, nil
	}
	if !ok {
		response.Fatal(rsp, fmt.Errorf("the step input has no template"))
		return rsp, nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the desired resources: %w", err))
		return rsp, nil
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the observed resources: %w", err))
		return rsp, nil
	}
	for i := int64(0); i < count; i++ {
		vm := composed.New()
		vm.SetUnstructuredContent(runtimeCopy(template))
		if err := vm.SetInteger("spec.forProvider.vmid", base+i); err != nil {
			response.Fatal(rsp, fmt.Errorf("cannot set the vmid: %w", err))
			return rsp, nil
		}
		name := resource.Name(fmt.Sprintf("vm-%d", i))
		ready := resource.ReadyFalse
		if o, ok := observed[name]; ok && o.Resource.GetCondition("Ready").Status == "True" {
			ready = resource.ReadyTrue
		}
		desired[name] = &resource.DesiredComposed{Resource: vm, Ready: ready}
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot set the desired resources: %w", err))
		return rsp, nil
	}
	response.Normalf(rsp, "composed %d ProxmoxVMs", count)
	return rsp, nil
}

// runtimeCopy deep-copies the template, so each VM is its own object.
func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

func main() {
	// Crossplane's Deployment of a function sets TLS_SERVER_CERTS_DIR (its
	// mTLS server certificates) and connects to port 9443.
	address := flag.String("address", ":9443", "where to serve gRPC")
	insecure := flag.Bool("insecure", false, "serve without mTLS (local runs only)")
	debug := flag.Bool("debug", false, "debug logging")
	flag.Parse()
	log, err := function.NewLogger(*debug)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Info("serving", "address", *address)
	if err := function.Serve(&Function{},
		function.Listen("tcp", *address),
		function.MTLSCertificates(os.Getenv("TLS_SERVER_CERTS_DIR")),
		function.Insecure(*insecure)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
