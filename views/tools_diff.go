package views

import "strings"

// Diff line kinds.
const (
	DiffSame    = ' '
	DiffAdded   = '+'
	DiffRemoved = '-'
	// DiffSkip stands for a run of unchanged lines left out; Text says how
	// many.
	DiffSkip = '~'
)

// DiffLine is one line of a line diff, with its numbers in the old and new
// text (0 where it has none).
type DiffLine struct {
	Op     byte
	Text   string
	OldNum int
	NewNum int
}

// diffContext is how many unchanged lines are kept around each change.
const diffContext = 3

// maxDiffCells bounds the LCS table; larger inputs (after the common head
// and tail are taken off) are shown as all removed then all added, which is
// still correct, only less precise.
const maxDiffCells = 4_000_000

// LineDiff compares two texts line by line (longest common subsequence)
// and keeps diffContext unchanged lines around each change. Two equal
// texts give no lines.
func LineDiff(a, b string) []DiffLine {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// The common head and tail need no table.
	head := 0
	for head < len(x) && head < len(y) && x[head] == y[head] {
		head++
	}
	tail := 0
	for tail < len(x)-head && tail < len(y)-head && x[len(x)-1-tail] == y[len(y)-1-tail] {
		tail++
	}
	mx, my := x[head:len(x)-tail], y[head:len(y)-tail]
	if len(mx) == 0 && len(my) == 0 {
		return nil
	}
	var all []DiffLine
	for i := range head {
		all = append(all, DiffLine{Op: DiffSame, Text: x[i], OldNum: i + 1, NewNum: i + 1})
	}
	oi, ni := head, head
	emit := func(op byte) {
		switch op {
		case DiffSame:
			all = append(all, DiffLine{Op: op, Text: x[oi], OldNum: oi + 1, NewNum: ni + 1})
			oi++
			ni++
		case DiffRemoved:
			all = append(all, DiffLine{Op: op, Text: x[oi], OldNum: oi + 1})
			oi++
		case DiffAdded:
			all = append(all, DiffLine{Op: op, Text: y[ni], NewNum: ni + 1})
			ni++
		}
	}
	if (len(mx)+1)*(len(my)+1) > maxDiffCells {
		for range mx {
			emit(DiffRemoved)
		}
		for range my {
			emit(DiffAdded)
		}
	} else {
		// lcs[i][j] is the LCS length of mx[i:] and my[j:].
		w := len(my) + 1
		lcs := make([]int32, (len(mx)+1)*w)
		for i := len(mx) - 1; i >= 0; i-- {
			for j := len(my) - 1; j >= 0; j-- {
				if mx[i] == my[j] {
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				} else {
					lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(mx) || j < len(my) {
			switch {
			case i < len(mx) && j < len(my) && mx[i] == my[j]:
				emit(DiffSame)
				i++
				j++
			case i < len(mx) && (j == len(my) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
				emit(DiffRemoved)
				i++
			default:
				emit(DiffAdded)
				j++
			}
		}
	}
	for range tail {
		emit(DiffSame)
	}
	return diffWithContext(all)
}

// diffWithContext drops unchanged lines farther than diffContext from any
// change, putting a DiffSkip line in their place.
func diffWithContext(all []DiffLine) []DiffLine {
	keep := make([]bool, len(all))
	for i, l := range all {
		if l.Op == DiffSame {
			continue
		}
		for k := max(0, i-diffContext); k <= min(len(all)-1, i+diffContext); k++ {
			keep[k] = true
		}
	}
	var out []DiffLine
	skipped := 0
	flush := func() {
		if skipped > 0 {
			out = append(out, DiffLine{Op: DiffSkip, Text: itoa(skipped) + " unchanged lines"})
			skipped = 0
		}
	}
	for i, l := range all {
		if !keep[i] {
			skipped++
			continue
		}
		flush()
		out = append(out, l)
	}
	flush()
	return out
}

func diffClass(op byte) string {
	switch op {
	case DiffAdded:
		return "diff-add"
	case DiffRemoved:
		return "diff-del"
	case DiffSkip:
		return "diff-skip"
	}
	return "diff-same"
}

func diffLineNum(n int) string {
	if n == 0 {
		return ""
	}
	return itoa(n)
}
