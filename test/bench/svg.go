package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The plot is written by hand: a few lines, points and labels need no plotting
// library, and the output stays diffable text.

type point struct{ x, y float64 }

// series is one line of a chart. An hline series is drawn across the whole chart at
// its first point's y (a baseline that does not depend on x).
type series struct {
	name   string
	color  string
	dashed bool
	hline  bool
	points []point
}

// chart is one panel: y against x, both axes from 0.
type chart struct {
	title  string
	xLabel string
	yLabel string
	series []series
}

const (
	panelWidth  = 460
	panelHeight = 340
	marginLeft  = 64
	marginRight = 16
	marginTop   = 56
	marginBot   = 48
	titleHeight = 28
)

// renderSVG draws charts side by side under title.
func renderSVG(title string, charts []chart) string {
	width := panelWidth * max(len(charts), 1)
	height := panelHeight + titleHeight
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" text-anchor="middle">%s</text>`+"\n", width/2, xmlText(title))
	for i, c := range charts {
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)">`+"\n", i*panelWidth, titleHeight)
		renderChart(&b, c)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// renderChart draws one panel in a panelWidth x panelHeight box.
func renderChart(b *strings.Builder, c chart) {
	xMax, yMax := extent(c.series)
	plotW := float64(panelWidth - marginLeft - marginRight)
	plotH := float64(panelHeight - marginTop - marginBot)
	px := func(x float64) float64 { return marginLeft + x/xMax*plotW }
	py := func(y float64) float64 { return marginTop + plotH - y/yMax*plotH }

	fmt.Fprintf(b, `<text x="%d" y="16" font-size="13" text-anchor="middle">%s</text>`+"\n", panelWidth/2, xmlText(c.title))
	for i := 0; i <= 5; i++ {
		y, x := yMax*float64(i)/5, xMax*float64(i)/5
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", f(px(0)), f(py(y)), f(px(xMax)), f(py(y)))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", f(px(0)-6), f(py(y)+4), tick(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f(px(x)), f(py(0)+16), tick(x))
	}
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="black"/>`+"\n", f(px(0)), f(py(0)), f(px(xMax)), f(py(0)))
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="black"/>`+"\n", f(px(0)), f(py(0)), f(px(0)), f(py(yMax)))
	fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", f(px(xMax/2)), panelHeight-12, xmlText(c.xLabel))
	fmt.Fprintf(b, `<text transform="translate(14,%s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", f(py(yMax/2)), xmlText(c.yLabel))

	for i, s := range c.series {
		renderSeries(b, s, px, py, xMax)
		// The legend sits at the top left of the plot, one line per series.
		ly := float64(marginTop + 4 + 15*i)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n",
			f(px(0)+10), f(ly), f(px(0)+30), f(ly), s.color, dash(s.dashed))
		fmt.Fprintf(b, `<text x="%s" y="%s">%s</text>`+"\n", f(px(0)+36), f(ly+4), xmlText(s.name))
	}
}

func renderSeries(b *strings.Builder, s series, px, py func(float64) float64, xMax float64) {
	if len(s.points) == 0 {
		return
	}
	if s.hline {
		y := s.points[0].y
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n",
			f(px(0)), f(py(y)), f(px(xMax)), f(py(y)), s.color, dash(s.dashed))
		return
	}
	if len(s.points) > 1 {
		var pts []string
		for _, p := range s.points {
			pts = append(pts, f(px(p.x))+","+f(py(p.y)))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n",
			strings.Join(pts, " "), s.color, dash(s.dashed))
	}
	for _, p := range s.points {
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="4" fill="%s"><title>%s: %s</title></circle>`+"\n",
			f(px(p.x)), f(py(p.y)), s.color, xmlText(s.name), tick(p.y))
	}
}

// extent is the nice upper bound of both axes over every series.
func extent(all []series) (xMax, yMax float64) {
	for _, s := range all {
		for _, p := range s.points {
			xMax, yMax = math.Max(xMax, p.x), math.Max(yMax, p.y)
		}
	}
	return niceCeil(xMax), niceCeil(yMax)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so axis ticks at fifths of
// it are round numbers.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*exp*(1+1e-9) {
			return m * exp
		}
	}
	return 10 * exp
}

func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func tick(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func dash(dashed bool) string {
	if dashed {
		return ` stroke-dasharray="6,4"`
	}
	return ""
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlText(s string) string { return xmlEscaper.Replace(s) }
