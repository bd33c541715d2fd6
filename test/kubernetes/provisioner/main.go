// Command sbx-k8s-provisioner is the test cluster's dynamic volume
// provisioner: for every claim of a StorageClass whose provisioner is its
// name it makes a directory under --dir and a hostPath PersistentVolume
// for it, and removes the directory when the volume is released under the
// Delete reclaim policy. The cluster has one node, so a directory on this
// host is where every pod runs; kind does the same with rancher's
// local-path-provisioner. The controller loop (watching claims, binding,
// events, retries) is sig-storage-lib-external-provisioner's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// annDir, on a volume it made, is the directory the provisioner made for
// it: Delete removes only a directory it recorded, inside --dir.
const annDir = "sbx-k8s.local/hostpath-dir"

// pvName is what the controller names volumes: pvc-<claim UID>.
var pvName = regexp.MustCompile(`^pvc-[0-9a-f-]{36}$`)

type hostPath struct {
	dir string
}

func (h *hostPath) Provision(ctx context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if !pvName.MatchString(o.PVName) {
		return nil, controller.ProvisioningFinished, fmt.Errorf("unexpected volume name %q", o.PVName)
	}
	if o.PVC.Spec.VolumeMode != nil && *o.PVC.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, errors.New("block volumes are not supported")
	}
	path := filepath.Join(h.dir, o.PVName)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	// World-writable as kind's local-path volumes are: a pod of any user
	// can write its claim.
	if err := os.Chmod(path, 0o777); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName, Annotations: map[string]string{annDir: path}},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			MountOptions:                  o.StorageClass.MountOptions,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: o.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: path, Type: ptr(v1.HostPathDirectory)},
			},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

func (h *hostPath) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	path := pv.Annotations[annDir]
	if path == "" || !pvName.MatchString(pv.Name) || path != filepath.Join(h.dir, pv.Name) {
		return &controller.IgnoredError{Reason: "not a volume this provisioner made in " + h.dir}
	}
	return os.RemoveAll(path)
}

func ptr[T any](v T) *T { return &v }

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig to reach the API server with")
	dir := flag.String("dir", "", "the directory that holds the volumes' directories")
	name := flag.String("name", "sbx-k8s.local/hostpath", "the provisioner name StorageClasses give")
	ready := flag.String("ready-file", "", "a file to create once the controller runs")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *dir == "" || !filepath.IsAbs(*dir) {
		fmt.Fprintln(os.Stderr, "usage: sbx-k8s-provisioner --kubeconfig FILE --dir ABSOLUTE-DIR [--name NAME]")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		klog.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pc := controller.NewProvisionController(ctx, client, *name, &hostPath{dir: filepath.Clean(*dir)},
		controller.LeaderElection(false), controller.Threadiness(2))
	done := make(chan struct{})
	go func() {
		pc.Run(ctx)
		close(done)
	}()
	if *ready != "" {
		// HasRun turns true once Run started the controller; a claim
		// made before its informers synced is in their first listing.
		t := time.NewTicker(100 * time.Millisecond)
		for !pc.HasRun() {
			select {
			case <-done:
				os.Exit(1)
			case <-t.C:
			}
		}
		t.Stop()
		if err := os.WriteFile(*ready, nil, 0o644); err != nil {
			klog.Fatal(err)
		}
	}
	<-done
}
