// Command pulumi-language-python is the language plugin through which the Pulumi engine runs this
// project's Python program.
//
// Pulumi's own Python language host lives in a Go module of its own
// (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) that the module proxy this
// project builds from does not serve. This plugin implements the same LanguageRuntime service on
// the pinned github.com/pulumi/pulumi/sdk/v3, for what `pulumi preview/up/destroy/about` ask of a
// Python program that uses pip and a virtual environment:
//
//   - Run starts Pulumi's own `pulumi-language-python-exec` shim (shipped in the sdk/v3 module,
//     installed beside this binary) with the virtual environment's Python, passing the engine's
//     request as the shim's command line and the stack configuration in PULUMI_CONFIG;
//   - GetRequiredPackages reports the resource plugins of the installed Python packages (their
//     pulumi-plugin.json), so the engine can check they are installed;
//   - About and GetProgramDependencies describe the interpreter and the installed packages.
//
// Everything else (program generation, dependency installation, plugins written in Python)
// answers Unimplemented, which the engine treats as "not supported by this language".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	execShim = "pulumi-language-python-exec"
	// The shim exits with this code after it reported the program's error itself.
	exitAfterUserMessage = 32
)

// Lists the pulumi-plugin.json documents of every installed distribution.
const listPluginsScript = `
import importlib.metadata as metadata, json
found = []
for dist in metadata.distributions():
    for file in dist.files or []:
        if file.name == "pulumi-plugin.json":
            try:
                found.append(json.loads(file.read_text()))
            except Exception:
                pass
print(json.dumps(found))
`

func main() {
	// The engine passes its own address as the last positional argument; flags are not used.
	engineAddress := ""
	for _, arg := range os.Args[1:] {
		if !strings.HasPrefix(arg, "-") {
			engineAddress = arg
		}
	}
	shim, err := findShim()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	host := &pythonHost{engineAddress: engineAddress, shim: shim}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: could not start the RPC server: %v\n", err)
		os.Exit(1)
	}
	// The engine reads the port from the first line of output.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: RPC server stopped: %v\n", err)
		os.Exit(1)
	}
}

// findShim returns the exec shim installed beside this binary (symlinks resolved).
func findShim() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	shim := filepath.Join(filepath.Dir(self), execShim)
	if _, err := os.Stat(shim); err != nil {
		return "", fmt.Errorf("%s not found beside %s: %w", execShim, self, err)
	}
	return shim, nil
}

type pythonHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	engineAddress string
	shim          string
}

func (h *pythonHost) Handshake(
	_ context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *pythonHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

// resolveToolchain selects pip with the `virtualenv` runtime option of Pulumi.yaml (relative to
// the project root), the only toolchain this project uses.
func resolveToolchain(info *pulumirpc.ProgramInfo) (toolchain.Toolchain, error) {
	if info == nil {
		return nil, errors.New("the engine sent no program information")
	}
	options := toolchain.PythonOptions{
		Root:       info.GetRootDirectory(),
		ProgramDir: info.GetProgramDirectory(),
		Toolchain:  toolchain.Pip,
	}
	if opts := info.GetOptions(); opts != nil {
		if tc, ok := opts.AsMap()["toolchain"].(string); ok && tc != "" && tc != "pip" {
			return nil, fmt.Errorf("runtime option toolchain=%q is not supported here (only pip)", tc)
		}
		if venv, ok := opts.AsMap()["virtualenv"].(string); ok {
			options.Virtualenv = venv
		}
	}
	tc, err := toolchain.ResolveToolchain(options)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(context.Background()); err != nil {
		return nil, err
	}
	return tc, nil
}

func (h *pythonHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	args := []string{h.shim}
	add := func(flag, value string) {
		if value != "" {
			args = append(args, "--"+flag, value)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engineAddress)
	add("project", req.GetProject())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", strconv.FormatBool(req.GetDryRun()))
	add("parallel", strconv.Itoa(int(req.GetParallel())))
	add("organization", req.GetOrganization())
	add("root_directory", req.GetInfo().GetRootDirectory())
	program := req.GetProgram()
	if program == "" {
		program = "."
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	// The shim expects a JSON object and a JSON list, also when they are empty.
	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
	}
	secretKeyList := req.GetConfigSecretKeys()
	if secretKeyList == nil {
		secretKeyList = []string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys, err := json.Marshal(secretKeyList)
	if err != nil {
		return nil, err
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env,
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys),
		"PYTHONUNBUFFERED=1",
	)
	cmd.Dir = req.GetPwd()
	// The engine shows what the program prints as diagnostics of this plugin.
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if exit.ExitCode() == exitAfterUserMessage {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{
				Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exit.ExitCode()),
			}, nil
		}
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("could not run the Python program: %v", err),
		}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

type pluginManifest struct {
	Resource bool   `json:"resource"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	Server   string `json:"server"`
}

func (h *pythonHost) GetRequiredPackages(
	ctx context.Context, req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return nil, err
	}
	cmd, err := tc.Command(ctx, "-c", listPluginsScript)
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the plugins of the installed packages: %w", err)
	}
	var manifests []pluginManifest
	if err := json.Unmarshal(out, &manifests); err != nil {
		return nil, fmt.Errorf("reading the plugins of the installed packages: %w", err)
	}
	response := &pulumirpc.GetRequiredPackagesResponse{}
	for _, m := range manifests {
		if !m.Resource || m.Name == "" {
			continue
		}
		v := m.Version
		if v != "" && !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		response.Packages = append(response.Packages, &pulumirpc.PackageDependency{
			Kind: "resource", Name: m.Name, Version: v, Server: m.Server,
		})
	}
	return response, nil
}

func (h *pythonHost) GetRequiredPlugins(
	ctx context.Context, req *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	packages, err := h.GetRequiredPackages(ctx, &pulumirpc.GetRequiredPackagesRequest{Info: req.GetInfo()})
	if err != nil {
		return nil, err
	}
	response := &pulumirpc.GetRequiredPluginsResponse{}
	for _, p := range packages.GetPackages() {
		response.Plugins = append(response.Plugins, &pulumirpc.PluginDependency{
			Kind: p.GetKind(), Name: p.GetName(), Version: p.GetVersion(), Server: p.GetServer(),
		})
	}
	return response, nil
}

func (h *pythonHost) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return nil, err
	}
	info, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: info.PythonExecutable,
		Version:    info.PythonVersion.String(),
		Metadata:   map[string]string{"toolchain": "pip", "toolchainVersion": info.ToolchainVersion.String()},
	}, nil
}

func (h *pythonHost) GetProgramDependencies(
	ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return nil, err
	}
	packages, err := tc.ListPackages(ctx, req.GetTransitiveDependencies())
	if err != nil {
		return nil, err
	}
	response := &pulumirpc.GetProgramDependenciesResponse{}
	for _, p := range packages {
		response.Dependencies = append(response.Dependencies,
			&pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return response, nil
}
