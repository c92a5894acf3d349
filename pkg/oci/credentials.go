package oci

import (
	"bytes"
	"fmt"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/docker/cli/cli/config/credentials"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// DockerConfigKeychain answers credentials from the contents of a
// kubernetes.io/dockerconfigjson Secret (its .dockerconfigjson key), read
// the way docker and the kubelet read it: an entry per registry host, with
// auth (base64 user:password) or username and password, or a token.
func DockerConfigKeychain(data []byte) (authn.Keychain, error) {
	cf, err := config.LoadFromReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a docker config JSON: %w", err)
	}
	return dockerConfig{cf}, nil
}

type dockerConfig struct{ cf *configfile.ConfigFile }

// Resolve implements authn.Keychain.
func (d dockerConfig) Resolve(target authn.Resource) (authn.Authenticator, error) {
	key := target.RegistryStr()
	if key == name.DefaultRegistry {
		key = authn.DefaultAuthKey
	}
	// A Secret holds no credential helpers: read the file's entries only.
	ac, ok := d.cf.AuthConfigs[key]
	if !ok {
		for k, v := range d.cf.AuthConfigs {
			if credentials.ConvertToHostname(k) == target.RegistryStr() {
				ac, ok = v, true
				break
			}
		}
	}
	if !ok || (ac.Username == "" && ac.Password == "" && ac.Auth == "" && ac.IdentityToken == "" && ac.RegistryToken == "") {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{
		Username:      ac.Username,
		Password:      ac.Password,
		Auth:          ac.Auth,
		IdentityToken: ac.IdentityToken,
		RegistryToken: ac.RegistryToken,
	}), nil
}

// SecretError is a pull secret that cannot be used: missing, unreadable,
// of the wrong type or malformed.
type SecretError struct{ Err error }

func (e *SecretError) Error() string { return e.Err.Error() }

func (e *SecretError) Unwrap() error { return e.Err }
