// Command argocd-lua runs an Argo CD health check (health.lua) against one
// object the way Argo CD runs a health customization from argocd-cm: in
// gopher-lua, Argo CD's Lua interpreter, with only the package, base and
// table libraries open (no string, math or os library: argocd-cm scripts get
// those only with useOpenLibs), the object as the global `obj` (JSON numbers
// become Lua numbers, null becomes nil) and a one-second deadline.
//
// Usage: argocd-lua health.lua < object.json
// Prints the returned table as JSON ({"status": ..., "message": ...}).
// Exit status: 0 ran, 1 the script failed or returned no table, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-lua health.lua < object.json")
		os.Exit(2)
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(2, err)
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(2, err)
	}
	var obj any
	if err := json.Unmarshal(input, &obj); err != nil {
		fail(2, fmt.Errorf("stdin is not JSON: %w", err))
	}

	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			fail(1, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decode(l, obj))
	if err := l.DoString(string(script)); err != nil {
		fail(1, err)
	}
	table, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		fail(1, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type()))
	}
	out := map[string]string{}
	table.ForEach(func(k, v lua.LValue) {
		out[k.String()] = v.String()
	})
	text, _ := json.Marshal(out)
	fmt.Println(string(text))
}

// decode converts a JSON value the way Argo CD's decodeValue does.
func decode(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decode(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decode(l, item))
		}
		return tbl
	}
	return lua.LNil
}

func fail(code int, err error) {
	fmt.Fprintf(os.Stderr, "argocd-lua: %v\n", err)
	os.Exit(code)
}
