package app

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// The deployment examples (deploy/) are read by the real configuration
// parser, so a variable misspelt, a value it refuses, or a mount, port,
// probe or secret that does not fit what the server does fails here,
// not on an operator's cluster. (Neither Docker nor Kubernetes runs in
// the tests: what they would do with the files is their documented
// behaviour; these are the files' links to Toolbelt.)

// parsed configures the server from env the way the deployment would
// once its operator has replaced the example's keys, and fails on any
// TOOLBELT_ variable the parser never reads. Each key the example sets
// must be a placeholder the server refuses to start with: an operator
// who leaves one in place gets an error, not an admin key anyone who
// read the example knows.
func parsed(t *testing.T, where string, env map[string]string) Config {
	t.Helper()
	env = maps.Clone(env)
	for _, name := range []string{"TOOLBELT_ADMIN_KEY", "TOOLBELT_CALLBACK_KEY", "TOOLBELT_OAUTH_KEY", "TOOLBELT_VAULT_KEY"} {
		if env[name] == "" {
			continue
		}
		if _, err := ParseConfig(nil, lookupIn(map[string]string{name: env[name]})); err == nil || !strings.Contains(err.Error(), name+" is a placeholder") {
			t.Errorf("%s: the server would start with the %s it ships (%v)", where, name, err)
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		env[name] = hex.EncodeToString(key)
	}
	read := map[string]bool{}
	cfg, err := ParseConfig(nil, func(name string) (string, bool) {
		read[name] = true
		v, ok := env[name]
		return v, ok
	})
	if err != nil {
		t.Fatalf("%s: the server refuses its configuration: %v", where, err)
	}
	for name := range env {
		if strings.HasPrefix(name, "TOOLBELT_") && !read[name] {
			t.Errorf("%s sets %s, which the server does not read", where, name)
		}
	}
	return cfg
}

// composeVar fills ${NAME}, ${NAME:-default} and ${NAME:?message} as
// docker compose does, from vars.
var composeVar = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?::([-?])([^}]*))?\}`)

func interpolate(t *testing.T, s string, vars map[string]string) string {
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		g := composeVar.FindStringSubmatch(m)
		v, ok := vars[g[1]]
		switch {
		case ok && v != "":
			return v
		case g[2] == "?":
			t.Errorf("compose would stop: %s is unset (%s)", g[1], g[3])
		case g[2] == "-":
			return g[3]
		}
		return v
	})
}

func readEnvFile(t *testing.T, name string) map[string]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

func TestComposeExample(t *testing.T) {
	vars := readEnvFile(t, "../deploy/example.env")
	raw, err := os.ReadFile("../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services map[string]struct {
			Environment map[string]string         `yaml:"environment"`
			Volumes     []string                  `yaml:"volumes"`
			SecurityOpt []string                  `yaml:"security_opt"`
			Build       *struct{ Context string } `yaml:"build"`
			Networks    map[string]struct {
				IPv4 string `yaml:"ipv4_address"`
			} `yaml:"networks"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal([]byte(interpolate(t, string(raw), vars)), &file); err != nil {
		t.Fatal(err)
	}
	nginx, err := os.ReadFile("../deploy/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	// The proxy's address is fixed, so the instances can believe its
	// X-Forwarded-For and nobody else's; every location sends the header.
	proxyAddr := file.Services["proxy"].Networks["default"].IPv4
	if proxyAddr == "" {
		t.Error("the proxy has no fixed address for TOOLBELT_TRUSTED_PROXIES to name")
	}
	if n, m := bytes.Count(nginx, []byte("proxy_pass ")), bytes.Count(nginx, []byte("proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;")); n != m {
		t.Errorf("nginx.conf: %d locations proxy, %d send X-Forwarded-For", n, m)
	}
	// A named volume on the sessions directory takes its owner from the
	// image's directory: the image must make it, owned by the server's user.
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	instances := map[string]bool{}
	for name, svc := range file.Services {
		if !strings.HasPrefix(name, "toolbelt-") {
			continue
		}
		cfg := parsed(t, "compose service "+name, svc.Environment)
		if instances[cfg.Instance] || cfg.Instance == "" {
			t.Errorf("%s: instance name %q is not its own", name, cfg.Instance)
		}
		instances[cfg.Instance] = true
		// Each instance would otherwise make a vault.key of its own, and
		// every one but the first would refuse to start.
		if cfg.VaultKey == "" {
			t.Errorf("%s: no TOOLBELT_VAULT_KEY shared with the other instances", name)
		}
		// The database and Redis are the file's own services.
		for _, raw := range []string{cfg.DatabaseURL, cfg.RedisURL} {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := file.Services[u.Hostname()]; !ok {
				t.Errorf("%s reaches %s, which is not a service of the file", name, u.Hostname())
			}
		}
		// Its data directory is a volume of its own, and the sessions one
		// volume that every instance mounts below it.
		mounts := map[string]string{}
		for _, v := range svc.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			mounts[dst] = src
			if _, ok := file.Volumes[src]; !ok && !strings.HasPrefix(src, ".") {
				t.Errorf("%s mounts %s, which is not a volume of the file", name, src)
			}
		}
		if mounts[cfg.DataDir] == "" || mounts[path.Join(cfg.DataDir, "sessions")] != "sessions" {
			t.Errorf("%s: data directory %s or its sessions not mounted as documented: %v", name, cfg.DataDir, mounts)
		}
		if !bytes.Contains(dockerfile, []byte("mkdir -p "+path.Join(cfg.DataDir, "sessions"))) {
			t.Errorf("%s: the image does not make %s, so its volume would be root's", name, path.Join(cfg.DataDir, "sessions"))
		}
		if !slices.Contains(cfg.TrustedProxies, proxyAddr+"/32") {
			t.Errorf("%s trusts %v, not the proxy %s", name, cfg.TrustedProxies, proxyAddr)
		}
		// The proxy sends traffic to the port it listens on.
		_, port, _ := net.SplitHostPort(cfg.Addr)
		if !bytes.Contains(nginx, []byte("server "+name+":"+port)) {
			t.Errorf("nginx.conf has no upstream %s:%s", name, port)
		}
		if svc.Build == nil || svc.Build.Context != ".." {
			t.Errorf("%s is not built from the repository's Dockerfile", name)
		}
		if !slices.Contains(svc.SecurityOpt, "seccomp=unconfined") {
			t.Errorf("%s: without seccomp=unconfined bubblewrap cannot make its namespaces", name)
		}
	}
	if len(instances) != 3 {
		t.Errorf("%d Toolbelt instances in the compose file, want 3", len(instances))
	}
}

func TestKubernetesExample(t *testing.T) {
	f, err := os.Open("../deploy/kubernetes/toolbelt.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type probe struct {
		HTTPGet struct {
			Path string
			Port string
		} `yaml:"httpGet"`
	}
	type doc struct {
		Kind     string
		Metadata struct{ Name string }
		// Secret
		StringData map[string]string `yaml:"stringData"`
		Spec       struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata struct{ Labels map[string]string }
				Spec     struct {
					Containers []struct {
						Ports []struct {
							Name          string
							ContainerPort int `yaml:"containerPort"`
						}
						Env []struct {
							Name      string
							Value     string
							ValueFrom *struct {
								SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
								FieldRef     *struct {
									FieldPath string `yaml:"fieldPath"`
								} `yaml:"fieldRef"`
							} `yaml:"valueFrom"`
						}
						ReadinessProbe probe `yaml:"readinessProbe"`
						LivenessProbe  probe `yaml:"livenessProbe"`
						StartupProbe   probe `yaml:"startupProbe"`
						VolumeMounts   []struct {
							Name      string
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					}
				}
			}
		}
	}
	docs := map[string]doc{}
	dec := yaml.NewDecoder(f)
	for {
		var d doc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Kind != "" {
			docs[d.Kind] = d
		}
	}
	dep, secret := docs["Deployment"], docs["Secret"]
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers", len(dep.Spec.Template.Spec.Containers))
	}
	c := dep.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secret.StringData[ref.Key]
			if ref.Name != secret.Metadata.Name || !ok {
				t.Errorf("%s reads secret %s key %s, which the file does not define", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = "toolbelt-5d9f7c-abcde" // a pod's name
		}
	}
	cfg := parsed(t, "the Deployment", env)
	if cfg.Instance == "" || cfg.DatabaseURL == "" || cfg.RedisURL == "" || cfg.CallbackKey == "" || cfg.OAuthKey == "" || cfg.VaultKey == "" || len(cfg.TrustedProxies) == 0 {
		t.Errorf("the Deployment does not configure a cluster member: %+v", cfg)
	}
	_, port, _ := net.SplitHostPort(cfg.Addr)
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || port != "8080" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("container port %+v does not match TOOLBELT_ADDR %s", c.Ports, cfg.Addr)
	}
	for name, p := range map[string]probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		want := "/healthz"
		if name == "readiness" {
			want = "/readyz" // out of the Service while it cannot record calls or run tools
		}
		if p.HTTPGet.Path != want || p.HTTPGet.Port != "http" {
			t.Errorf("%s probe %+v, want %s on port http", name, p.HTTPGet, want)
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if mounts[cfg.DataDir] == "" || mounts[path.Join(cfg.DataDir, "sessions")] != "sessions" {
		t.Errorf("data directory %s or its shared sessions not mounted: %v", cfg.DataDir, mounts)
	}
	labels := dep.Spec.Template.Metadata.Labels
	for _, kind := range []string{"Deployment", "PodDisruptionBudget"} {
		for k, v := range docs[kind].Spec.Selector.MatchLabels {
			if labels[k] != v {
				t.Errorf("the %s selects %s=%s, which the pods do not carry (%v)", kind, k, v, labels)
			}
		}
	}
	for _, kind := range []string{"Service", "PersistentVolumeClaim"} {
		if _, ok := docs[kind]; !ok {
			t.Errorf("no %s in the manifest", kind)
		}
	}
}

// The Dockerfile downloads the modules before it copies the source: a
// module go.mod replaces with a local directory must be copied first, or
// `go mod download` fails in the image.
func TestDockerfileCopiesReplacedModules(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	download := bytes.Index(dockerfile, []byte("RUN go mod download"))
	if download < 0 {
		t.Fatal("the Dockerfile no longer runs go mod download")
	}
	replaced := 0
	for _, line := range strings.Split(string(mod), "\n") {
		_, dir, ok := strings.Cut(line, "=> ./")
		if !strings.HasPrefix(line, "replace ") || !ok {
			continue
		}
		replaced++
		dir = strings.TrimSpace(dir)
		if at := bytes.Index(dockerfile, []byte("COPY "+dir+" "+dir+"\n")); at < 0 || at > download {
			t.Errorf("the Dockerfile does not copy %s before go mod download", dir)
		}
		if _, err := os.Stat("../" + dir + "/go.mod"); err != nil {
			t.Errorf("go.mod replaces a module with %s: %v", dir, err)
		}
	}
	if replaced == 0 {
		t.Log("go.mod replaces no module with a local one")
	}
}
