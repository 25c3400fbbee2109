package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/podpatch/podpatch/webhook"
)

// logOptions are the logging flags.
type logOptions struct {
	Level       string
	Development bool
}

func (o *logOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "debug, info or error")
	fs.BoolVar(&o.Development, "log-development", false, "human-readable console logs instead of JSON")
}

func runServe(args []string, stderr io.Writer) error {
	o := webhook.NewOptions()
	lo := &logOptions{}
	if _, err := parseCommand("serve", args, stderr, false, o, lo); err != nil {
		return err
	}
	if _, err := o.Validate(); err != nil {
		return usageError{err}
	}
	var level zapcore.Level
	if err := level.Set(lo.Level); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}
	log := zap.New(zap.WriteTo(stderr), zap.Level(level), zap.UseDevMode(lo.Development))
	ctrllog.SetLogger(log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return webhook.Run(ctx, o, log)
}
