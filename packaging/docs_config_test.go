package packaging_test

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd"
)

// TestOperationsConfigKeys checks the config reference of docs/OPERATIONS.md against
// deployd.Config and deployd.DefaultConfig: every key has a row, every row is a key,
// and the default column shows DefaultConfig's value. config.yaml.example, install.sh
// and the ansible role send the operator there.
func TestOperationsConfigKeys(t *testing.T) {
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	rows := map[string]string{} // key -> default column
	row := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| ([^|]*) \\|")
	for _, m := range row.FindAllStringSubmatch(ops, -1) {
		if strings.Contains(m[1], "_") || strings.Contains(m[1], ".") || m[1] == "tenancy" {
			rows[m[1]] = strings.TrimSpace(m[2])
		}
	}
	want := map[string]string{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		for i := range v.NumField() {
			key := prefix + v.Type().Field(i).Tag.Get("yaml")
			switch f := v.Field(i); {
			case f.Kind() == reflect.Struct:
				walk(f, key+".")
			case f.Kind() == reflect.Slice:
				want[key] = "`[]`"
			case f.Type() == reflect.TypeFor[deployd.Duration]():
				d := time.Duration(f.Int())
				want[key] = "`" + strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "m0") + "`"
				if d%time.Minute != 0 {
					want[key] = "`" + d.String() + "`"
				}
			case f.Kind() == reflect.String && f.String() == "":
				want[key] = "—"
			case f.Kind() == reflect.String:
				want[key] = "`" + f.String() + "`"
			default:
				want[key] = "`" + strconv.FormatInt(f.Int(), 10) + "`"
			}
		}
	}
	walk(reflect.ValueOf(deployd.DefaultConfig()), "")
	for key, def := range want {
		got, ok := rows[key]
		if !assert.True(t, ok, "config key %s has no row in docs/OPERATIONS.md", key) {
			continue
		}
		assert.Equal(t, def, got, "default of %s in docs/OPERATIONS.md", key)
	}
	for key := range rows {
		if strings.Contains(key, ".") || slices.Contains([]string{"env_id", "deploy_dir", "state_dir", "bootstrap_grant", "min_free_mb"}, key) {
			_, ok := want[key]
			assert.True(t, ok, "docs/OPERATIONS.md has a config row %s that is not a key", key)
		}
	}
}
