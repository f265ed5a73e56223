package jsonbtext

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The number rule. JSON numbers have no size limit, and Postgres stores
// those of a jsonb value as numeric, which writes them back in plain
// decimal: 1e100000 is five bytes when sent and a hundred thousand and one
// when read, in every answer and every event that carries it. Check
// refuses the numbers that cost more on the way out than on the way in,
// with bounds that every number a 64-bit float or a 64-bit integer holds
// (and every decimal of up to MaxNumberDigits digits in that range)
// passes:
//   - at most MaxNumberDigits digits before the exponent;
//   - an exponent of at most MaxNumberExponent in magnitude;
//   - a value of zero or within the 64-bit float range: at most
//     math.MaxFloat64 in magnitude, and not so small that a 64-bit float
//     rounds it to zero (about 4.9e-324);
//   - all the numbers of one value together at most MaxExpansion bytes
//     longer in plain decimal than as sent, so that a stored value is
//     written back in at most its size plus MaxExpansion.
const (
	// MaxNumberDigits is the most digits a number may have before its
	// exponent (leading and trailing zeros count): more than a 64-bit
	// integer (20) or the exact decimal of any float a client sends.
	MaxNumberDigits = 100
	// MaxNumberExponent is the largest magnitude of a number's written
	// exponent: 1e400 and 0e-400 are allowed by it, 0e-401 is not (and
	// 1e400 is refused by the range rule).
	MaxNumberExponent = 400
	// MaxExpansion is how many bytes longer the numbers of one JSON
	// value may become in Postgres's plain-decimal form than as sent
	// (64 KiB): a thousand numbers like 1e60, or two hundred like 1e300.
	MaxExpansion = 64 << 10
)

// isNumberByte reports whether c can continue a JSON number token.
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// checkNumber applies the per-number rules to tok, a JSON number, and
// returns the length of its plain-decimal form as Postgres's numeric
// writes it (PlainLen).
func checkNumber(tok string) (int, error) {
	shown := tok
	if len(shown) > 40 {
		shown = shown[:20] + "…" + shown[len(shown)-12:]
	}
	mant, expText, hasExp := tok, "", false
	if i := strings.IndexAny(tok, "eE"); i >= 0 {
		mant, expText, hasExp = tok[:i], tok[i+1:], true
	}
	mant = strings.TrimPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(mant, ".")
	if d := len(intPart) + len(frac); d > MaxNumberDigits {
		return 0, fmt.Errorf("has a number of %d digits (%s); the limit is %d digits (MaxNumberDigits): send it as a string", d, shown, MaxNumberDigits)
	}
	exp := 0
	if hasExp {
		e := strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(expText, "+"), "-"), "0")
		if len(e) > 4 {
			return 0, fmt.Errorf("has the number %s, whose exponent exceeds %d (MaxNumberExponent)", shown, MaxNumberExponent)
		}
		exp, _ = strconv.Atoi("0" + e)
		if exp > MaxNumberExponent {
			return 0, fmt.Errorf("has the number %s, whose exponent exceeds %d (MaxNumberExponent)", shown, MaxNumberExponent)
		}
		if strings.HasPrefix(expText, "-") {
			exp = -exp
		}
	}
	// Without an exponent, MaxNumberDigits digits are well inside the
	// float range (1e-100 to 1e100).
	if hasExp && strings.Trim(intPart+frac, "0") != "" {
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil || math.IsInf(f, 0) || f == 0 {
			return 0, fmt.Errorf("has the number %s, which is outside the 64-bit float range (magnitude about 4.9e-324 to 1.8e308, or zero)", shown)
		}
	}
	return plainLen(tok[0] == '-', intPart, frac, exp), nil
}

// plainLen is the length of numeric's text for the number whose digits
// before and after the point are intPart and frac and whose exponent is
// exp: no exponent, no leading zeros before the point (but one "0"),
// and max(0, len(frac)-exp) digits after it; a minus sign unless the value
// is zero.
func plainLen(neg bool, intPart, frac string, exp int) int {
	digits := intPart + frac
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	n := len(intPart) + exp - lead // digits before the point
	if n < 1 || lead == len(digits) {
		n = 1
	}
	if scale := len(frac) - exp; scale > 0 {
		n += 1 + scale
	}
	if neg && strings.Trim(digits, "0") != "" {
		n++
	}
	return n
}

// PlainLen returns the length of the plain-decimal text Postgres's
// numeric (and so jsonb) writes for the JSON number tok, which must pass
// Check: PlainLen("1e3") is 4 ("1000"), PlainLen("1.50") is 4, and
// PlainLen("-0.0") is 3 ("0.0").
func PlainLen(tok string) int {
	n, err := checkNumber(tok)
	if err != nil {
		return -1
	}
	return n
}

// CheckNumber applies the per-number rules (digits, exponent, range; not
// MaxExpansion, which is per value) to tok, one JSON number: the shared
// rule for a caller that holds numbers rather than JSON text. The error
// is a predicate like Error.Problem ("has the number 1e999, which ...").
func CheckNumber(tok string) error {
	_, err := checkNumber(tok)
	return err
}
