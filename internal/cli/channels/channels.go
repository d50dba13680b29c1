// Package channels implements `cotal channels list|set|default`: the channel registry.
package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal channels`.
type Options struct {
	*factory.Factory
	JSON bool

	// set and default: which fields the flags change.
	Name         string
	Replay       bool
	NoReplay     bool
	Window       string
	Desc         string
	Instructions string
	Class        string
	changed      func(flag string) bool
}

// Entry is one row of `cotal channels list --json`; the field names are a stable interface.
type Entry struct {
	Channel   string                `json:"channel"`
	Config    *wire.ChannelConfig   `json:"config,omitempty"`
	Effective wire.EffectiveChannel `json:"effective"`
	Defaults  *wire.ChannelDefaults `json:"-"`
}

// NewCmdChannels returns `cotal channels` with list, set and default.
func NewCmdChannels(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{Use: "channels", Short: "List and configure channels (replay, window, delivery class)"}
	pf := cmd.PersistentFlags()
	o.Target.Register(pf)
	list := &cobra.Command{
		Use: "list", Short: "List configured channels and the space defaults", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listRun(cmd.Context(), o) },
	}
	list.Flags().BoolVar(&o.JSON, "json", false, "print the list as JSON")
	set := &cobra.Command{
		Use: "set NAME", Short: "Configure a channel", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.changed = args[0], cmd.Flags().Changed
			return setRun(cmd.Context(), o)
		},
	}
	def := &cobra.Command{
		Use: "default", Short: "Configure the space defaults every channel falls back to", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Name, o.changed = wire.ChannelDefaultsKey, cmd.Flags().Changed
			return setRun(cmd.Context(), o)
		},
	}
	for _, c := range []*cobra.Command{set, def} {
		f := c.Flags()
		f.BoolVar(&o.Replay, "replay", false, "backfill history on join")
		f.BoolVar(&o.NoReplay, "no-replay", false, "do not backfill history on join")
		f.StringVar(&o.Window, "window", "", `backfill horizon, e.g. "24h" ("" keeps it)`)
		f.StringVar(&o.Class, "class", "", "delivery class: live or durable")
	}
	set.Flags().StringVar(&o.Desc, "desc", "", "one-line purpose (at most 200 characters)")
	set.Flags().StringVar(&o.Instructions, "instructions", "", "advisory usage text (at most 2000 characters)")
	cmd.AddCommand(list, set, def)
	return cmd
}

// registry opens the channels bucket as a credential of profile.
func registry(ctx context.Context, o *Options, profile authority.Profile) (jetstream.KeyValue, func(), error) {
	_, _, sp, err := o.Mesh("")
	if err != nil {
		return nil, nil, err
	}
	js, closeFn, err := o.JetStream(ctx, sp, profile, "cotal_channels")
	if err != nil {
		return nil, nil, err
	}
	kv, err := js.KeyValue(ctx, string(sp.ChannelsBucket()))
	if err != nil {
		closeFn()
		return nil, nil, fmt.Errorf("open the channel registry: %w", err)
	}
	return kv, closeFn, nil
}

func listRun(ctx context.Context, o *Options) error {
	kv, closeFn, err := registry(ctx, o, authority.ProfileOperator)
	if err != nil {
		return err
	}
	defer closeFn()
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("list channels: %w", err)
	}
	var names []string
	for k := range keys.Keys() {
		names = append(names, k)
	}
	sort.Strings(names)
	var defaults *wire.ChannelDefaults
	configs := map[string]*wire.ChannelConfig{}
	for _, k := range names {
		e, err := kv.Get(ctx, k)
		if err != nil {
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue
			}
			return fmt.Errorf("read %s: %w", k, err)
		}
		if k == wire.ChannelDefaultsKey {
			if defaults, err = wire.DecodeChannelDefaults(e.Value()); err != nil {
				fmt.Fprintf(o.IO.ErrOut, "the space defaults are not valid and are ignored: %v\n", err)
			}
			continue
		}
		cfg, err := wire.DecodeChannelConfig(e.Value())
		if err != nil {
			fmt.Fprintf(o.IO.ErrOut, "channel %s has an invalid config and is shown with the defaults: %v\n", k, err)
		}
		configs[k] = cfg
	}
	var entries []Entry
	for _, k := range names {
		if k == wire.ChannelDefaultsKey || k == wire.TTLCanaryKey {
			continue
		}
		entries = append(entries, Entry{Channel: k, Config: configs[k], Effective: wire.ResolveChannel(configs[k], defaults)})
	}
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(map[string]any{"defaults": defaults, "channels": entries})
	}
	eff := wire.ResolveChannel(nil, defaults)
	fmt.Fprintf(o.IO.Out, "defaults: class %s, replay %v%s\n", eff.DeliveryClass, eff.Replay, window(eff))
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tCLASS\tREPLAY\tWINDOW\tDESCRIPTION")
	for _, e := range entries {
		desc := ""
		if e.Config != nil {
			desc = e.Config.Description
		}
		w := "-"
		if e.Effective.ReplayWindow > 0 {
			w = e.Effective.ReplayWindow.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", e.Channel, e.Effective.DeliveryClass, e.Effective.Replay, w, desc)
	}
	return tw.Flush()
}

func window(e wire.EffectiveChannel) string {
	if e.ReplayWindow == 0 {
		return ""
	}
	return ", window " + e.ReplayWindow.String()
}

func setRun(ctx context.Context, o *Options) error {
	if o.changed("replay") && o.changed("no-replay") {
		return &exit.UsageError{Err: errors.New("--replay and --no-replay contradict each other")}
	}
	isDefaults := o.Name == wire.ChannelDefaultsKey
	if !isDefaults {
		if err := wire.ValidateChannel(o.Name); err != nil {
			return &exit.UsageError{Err: err}
		}
	}
	kv, closeFn, err := registry(ctx, o, authority.ProfileChannelWriter)
	if err != nil {
		return err
	}
	defer closeFn()
	var cfg wire.ChannelConfig
	var rev uint64
	e, err := kv.Get(ctx, o.Name)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("read %s: %w", o.Name, err)
	default:
		rev = e.Revision()
		if err := json.Unmarshal(e.Value(), &cfg); err != nil {
			return fmt.Errorf("the stored config of %s is not valid JSON (left untouched): %w", o.Name, err)
		}
	}
	o.apply(&cfg)
	var value []byte
	if isDefaults {
		d := wire.ChannelDefaults{Replay: cfg.Replay, ReplayWindow: cfg.ReplayWindow, DeliveryClass: cfg.DeliveryClass}
		if err := d.Validate(); err != nil {
			return &exit.UsageError{Err: err}
		}
		value, err = json.Marshal(d)
	} else {
		if err := cfg.Validate(); err != nil {
			return &exit.UsageError{Err: err}
		}
		value, err = json.Marshal(cfg)
	}
	if err != nil {
		return err
	}
	// A revision-checked write: a concurrent edit makes this one fail rather than vanish.
	if rev == 0 {
		_, err = kv.Create(ctx, o.Name, value)
	} else {
		_, err = kv.Update(ctx, o.Name, value, rev)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", o.Name, err)
	}
	fmt.Fprintf(o.IO.Out, "%s: %s\n", o.Name, value)
	return nil
}

// apply sets the fields whose flags were given.
func (o *Options) apply(cfg *wire.ChannelConfig) {
	yes, no := true, false
	if o.changed("replay") {
		cfg.Replay = &yes
	}
	if o.changed("no-replay") {
		cfg.Replay = &no
	}
	if o.changed("window") {
		cfg.ReplayWindow = o.Window
	}
	if o.changed("class") {
		cfg.DeliveryClass = wire.DeliveryClass(o.Class)
	}
	if o.changed("desc") {
		cfg.Description = o.Desc
	}
	if o.changed("instructions") {
		cfg.Instructions = o.Instructions
	}
}
