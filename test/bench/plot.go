package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// serverColors are the plot's colours, one per server.
var serverColors = map[string]color.RGBA{
	"allow":     {R: 0x70, G: 0x70, B: 0x70, A: 0xff},
	"idiomatic": {R: 0xd6, G: 0x5f, B: 0x00, A: 0xff},
	"podpatch":  {R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff},
}

// WritePlot draws p50 and p99 latency against offered rate for the three servers (podpatch
// with 5 policies) into a PNG.
func (r *Report) WritePlot(path string) error {
	p := plot.New()
	p.Title.Text = "Latency against offered rate (HTTPS on loopback, Dask worker, 5 policies)"
	p.X.Label.Text = "offered rate (requests/s)"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = latencyTicks{}
	var rates []float64
	for _, l := range r.Load {
		if l.Server == "podpatch" && l.Policies == 5 && l.Spec.Rate > 0 {
			rates = append(rates, float64(l.Spec.Rate))
		}
	}
	ticks := make([]plot.Tick, len(rates))
	for i, x := range rates {
		ticks[i] = plot.Tick{Value: x, Label: fmt.Sprintf("%.0f", x)}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	p.Add(plotter.NewGrid())

	for _, server := range []string{"allow", "idiomatic", "podpatch"} {
		pol := 0
		if server == "podpatch" {
			pol = 5
		}
		for _, q := range []struct {
			name   string
			val    func(LoadResult) float64
			dashed bool
		}{
			{"p50", func(l LoadResult) float64 { return float64(l.P50) / 1e6 }, false},
			{"p99", func(l LoadResult) float64 { return float64(l.P99) / 1e6 }, true},
		} {
			var pts plotter.XYs
			var sat plotter.XYs
			for _, l := range r.Load {
				if l.Server != server || l.Policies != pol || l.Spec.Rate == 0 || l.P50 == 0 {
					continue
				}
				pt := plotter.XY{X: float64(l.Spec.Rate), Y: math.Max(q.val(l), 0.01)}
				pts = append(pts, pt)
				if l.Saturated() {
					sat = append(sat, pt)
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			c := serverColors[server]
			line.Color, points.Color = c, c
			line.Width = vg.Points(2)
			points.Shape = draw.CircleGlyph{}
			points.Radius = vg.Points(3)
			if q.dashed {
				line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
				points.Shape = draw.BoxGlyph{}
			}
			p.Add(line, points)
			p.Legend.Add(fmt.Sprintf("%s %s", server, q.name), line, points)
			if len(sat) > 0 {
				s, err := plotter.NewScatter(sat)
				if err != nil {
					return err
				}
				s.Shape = draw.RingGlyph{}
				s.Radius = vg.Points(7)
				s.Color = c
				p.Add(s)
			}
		}
	}
	p.Legend.Add("ring: saturated (achieved < 95 % of offered)")
	// Room above the data for the legend.
	lo, hi := math.Inf(1), 0.0
	for _, l := range r.Load {
		if l.Spec.Rate > 0 && l.P50 > 0 {
			lo, hi = math.Min(lo, float64(l.P50)/1e6), math.Max(hi, float64(l.P99)/1e6)
		}
	}
	if hi > 0 {
		p.Y.Min, p.Y.Max = lo/1.5, hi*8
	}
	if len(rates) > 0 {
		p.X.Min, p.X.Max = rates[0]/1.3, rates[len(rates)-1]*1.3
	}
	img := vgimg.NewWith(vgimg.UseWH(9*vg.Inch, 5.5*vg.Inch), vgimg.UseDPI(144))
	p.Draw(draw.New(img))
	return writePNG(img, path)
}

// latencyTicks labels a logarithmic millisecond axis at 1-2-5 steps.
type latencyTicks struct{}

func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
		}
	}
	return ticks
}

// WriteStorePlot draws the store run into a PNG of two panels against the number of policy
// ConfigMaps: steady and peak RSS, and the time and CPU from start to ready.
func (r *Report) WriteStorePlot(path string) error {
	if len(r.Store) == 0 {
		return nil
	}
	ticks := make([]plot.Tick, len(r.Store))
	for i, s := range r.Store {
		ticks[i] = plot.Tick{Value: float64(s.ConfigMaps), Label: thousands(s.ConfigMaps)}
	}
	panel := func(title, ylabel string, series []storeSeries, goals plotter.XYs) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "policy ConfigMaps (log scale)"
		p.Y.Label.Text = ylabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.X.Min, p.X.Max = ticks[0].Value/1.5, ticks[len(ticks)-1].Value*1.5
		p.Y.Min = 0
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs = vg.Points(8)
		p.Add(plotter.NewGrid())
		for _, s := range series {
			pts := make(plotter.XYs, len(r.Store))
			for i, res := range r.Store {
				pts[i] = plotter.XY{X: float64(res.ConfigMaps), Y: s.val(res)}
				p.Y.Max = math.Max(p.Y.Max, pts[i].Y*1.3)
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			line.Color, points.Color = s.color, s.color
			line.Width = vg.Points(2)
			points.Shape, points.Radius = draw.CircleGlyph{}, vg.Points(3)
			if s.dashed {
				line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			p.Add(line, points)
			p.Legend.Add(s.name, line, points)
		}
		if len(goals) > 0 {
			mark, err := plotter.NewScatter(goals)
			if err != nil {
				return nil, err
			}
			mark.Shape, mark.Radius, mark.Color = draw.CrossGlyph{}, vg.Points(9), serverColors["idiomatic"]
			p.Add(mark)
			for _, g := range goals {
				p.Y.Max = math.Max(p.Y.Max, g.Y*1.3)
			}
		}
		return p, nil
	}
	blue, grey := serverColors["podpatch"], serverColors["allow"]
	mem, err := panel("Memory of podpatch serve", "MB", []storeSeries{
		{"steady RSS", func(s StoreResult) float64 { return s2MB(s.RSS) }, blue, false},
		{"peak RSS (VmHWM)", func(s StoreResult) float64 { return s2MB(s.PeakRSS) }, grey, true},
	}, plotter.XYs{{X: 1000, Y: s2MB(goalRSS1k)}, {X: 10000, Y: s2MB(goalRSS10k)}})
	if err != nil {
		return err
	}
	mem.Legend.Add("cross: goal (40 MB at 1,000, 60 MB at 10,000)")
	start, err := panel("Cold start through the API server", "seconds", []storeSeries{
		{"start to ready", func(s StoreResult) float64 { return s.Ready.Seconds() }, blue, false},
		{"CPU to ready", func(s StoreResult) float64 { return s.ReadyCPU.Seconds() }, grey, true},
	}, plotter.XYs{{X: 10000, Y: goalColdStart10k.Seconds()}})
	if err != nil {
		return err
	}
	start.Legend.Add("cross: goal (5 s at 10,000)")
	img := vgimg.NewWith(vgimg.UseWH(12*vg.Inch, 5*vg.Inch), vgimg.UseDPI(144))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(12), PadY: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8), PadTop: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{mem, start}}, tiles, dc)
	mem.Draw(canvases[0][0])
	start.Draw(canvases[0][1])
	return writePNG(img, path)
}

// storeSeries is one line of the store plot.
type storeSeries struct {
	name   string
	val    func(StoreResult) float64
	color  color.RGBA
	dashed bool
}

func s2MB(b int64) float64 { return float64(b) / 1e6 }

// writePNG writes a drawn canvas to path as a PNG.
func writePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
