package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
)

// schedulerServices are the fixtures' scheduler and driver Services, which the example policy
// external-urls asks a URL for.
var schedulerServices = []client.ObjectKey{
	{Namespace: "default", Name: "simple-scheduler"},
	{Namespace: "spark-jobs", Name: "spark-pi-5f1c2a9e8d7b6c40-driver-svc"},
	{Namespace: "default", Name: "raycluster-kuberay-head-svc"},
	{Namespace: "default", Name: "basic-example-rest"},
}

// showExternalURLs prints the URLs podpatch resolved for the fixtures' Services and the Event a
// Dask user sees on their DaskCluster; then it plays the cloud controller for a LoadBalancer
// Service that asks through Spark's legacy annotation.
func showExternalURLs(ctx context.Context, c client.Client) error {
	step("external URLs: where each dashboard is (podpatch.io/external-url, reference §6)")
	for _, key := range schedulerServices {
		s, err := waitForAnnotation(ctx, c, key, policies.ExternalURLAnnotation)
		if err != nil {
			return err
		}
		fmt.Printf("    Service %-45s %s (%s)\n", key.String(), s.Annotations[policies.ExternalURLAnnotation],
			s.Annotations[policies.ExternalURLSourceAnnotation])
	}
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace("default")); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "DaskCluster" {
			fmt.Printf("    Event on DaskCluster %s: %s %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}

	step("external URLs: a LoadBalancer Service asking through Spark's legacy annotation; the demo is the cloud controller")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "spark-jobs", Name: "spark-history-server",
			Labels:      map[string]string{"app": "spark-history-server"},
			Annotations: map[string]string{policies.SparkProvideExternalURIAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "spark-history-server"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 18080}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	fmt.Printf("    created Service %s/%s (type LoadBalancer, %s)\n", svc.Namespace, svc.Name, policies.SparkProvideExternalURIAnnotation)
	ingress := corev1.LoadBalancerIngress{IP: "203.0.113.10"}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), cur); err != nil {
			return err
		}
		cur.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{ingress}
		return c.Status().Update(ctx, cur)
	}); err != nil {
		return err
	}
	fmt.Printf("    cloud controller: status.loadBalancer.ingress[0].ip = %s\n", ingress.IP)
	s, err := waitForAnnotation(ctx, c, client.ObjectKeyFromObject(svc), policies.SparkResolvedExternalURIAnnotation)
	if err != nil {
		return err
	}
	fmt.Printf("    %s: %s\n", policies.SparkResolvedExternalURIAnnotation, s.Annotations[policies.SparkResolvedExternalURIAnnotation])
	return nil
}

// waitForAnnotation waits until podpatch has written the annotation on the Service.
func waitForAnnotation(ctx context.Context, c client.Client, key client.ObjectKey, annotation string) (*corev1.Service, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := &corev1.Service{}
		if err := c.Get(ctx, key, s); err != nil {
			return nil, err
		}
		if s.Annotations[annotation] != "" {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("service %s: no %s after 30s", key, annotation)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
