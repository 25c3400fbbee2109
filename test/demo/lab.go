package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/test/cluster"
)

// startLab runs kube-scheduler and kwok and creates the lab's node pools (cluster.LabPools),
// so that each Pod the demo creates is scheduled; stop ends both processes.
func startLab(ctx context.Context, cp *cluster.ControlPlane, root string) (stop func() error, err error) {
	bin := filepath.Join(root, "bin")
	sched, err := cp.StartScheduler(bin)
	if err != nil {
		return nil, err
	}
	kwok, err := cp.StartKwok(bin)
	if err != nil {
		return nil, errors.Join(err, sched.Stop())
	}
	stop = func() error { return errors.Join(kwok.Stop(), sched.Stop()) }
	if _, err := cluster.CreatePools(ctx, cp.Client, cluster.LabPools()); err != nil {
		return nil, errors.Join(err, stop())
	}
	return stop, nil
}

// showPlacement prints where the scheduler put a Pod the demo created: its Node and pool once
// Running, or the scheduler's own reason when it found no Node.
func showPlacement(ctx context.Context, c client.Client, namespace, name string) error {
	pl, err := cluster.WaitPlaced(ctx, c, namespace, name, 30*time.Second)
	if err != nil {
		return err
	}
	if pl.Unschedulable != "" {
		fmt.Printf("    scheduled: Pending: %s\n", pl.Unschedulable)
		return nil
	}
	fmt.Printf("    scheduled: node %s, pool %s, Running\n", pl.Node, pl.Pool)
	return nil
}
