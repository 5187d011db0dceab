package informers

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// maxCertificateBytes is the most a cached certificate Secret may hold in tls.crt and
// tls.key together. A certificate chain and its key take a few KiB; the API server
// admits Secrets of up to 1 MiB, so without a limit of its own every listener could
// pin a MiB in the controller's memory. A larger Secret is cached without its data and
// refused (SecretRefusal).
const maxCertificateBytes = 64 << 10

// refusedSizeAnnotation marks, in the cache only, a Secret whose data trimSecret
// dropped for being larger than maxCertificateBytes; its value is the size in bytes.
// The API server never sees it.
const refusedSizeAnnotation = "consul-gateway-controller.internal/refused-certificate-bytes"

// trimSecret is the transform of every Secret watch: the metadata trimmed as for every
// cache, and of the data only tls.crt and tls.key, the only keys a listener's
// certificate is read from (ca.crt and any padding stay on the API server). A Secret
// whose two keys exceed maxCertificateBytes keeps neither, and is marked refused.
func trimSecret(obj any) (any, error) {
	obj, err := trimMetadata(obj)
	if err != nil {
		return obj, err
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	cert, key := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	// The transform may run twice on one object (a watch-list's initial events): a
	// Secret already refused stays so. Otherwise the mark is the cache's own, which a
	// Secret's author cannot set on a Secret with a certificate.
	if _, refused := secret.Annotations[refusedSizeAnnotation]; refused && len(cert)+len(key) == 0 {
		return secret, nil
	}
	delete(secret.Annotations, refusedSizeAnnotation)
	secret.StringData = nil
	if size := len(cert) + len(key); size > maxCertificateBytes {
		secret.Data = nil
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[refusedSizeAnnotation] = strconv.Itoa(size)
		return secret, nil
	}
	secret.Data = map[string][]byte{}
	if cert != nil {
		secret.Data[corev1.TLSCertKey] = cert
	}
	if key != nil {
		secret.Data[corev1.TLSPrivateKeyKey] = key
	}
	return secret, nil
}

// SecretRefusal says why a cached certificate Secret may not be used, "" when it may:
// its tls.crt and tls.key were over maxCertificateBytes, so the cache kept neither.
func SecretRefusal(secret *corev1.Secret) string {
	size, ok := secret.Annotations[refusedSizeAnnotation]
	if !ok {
		return ""
	}
	return fmt.Sprintf("its tls.crt and tls.key hold %s bytes, over the controller's limit of %d", size, maxCertificateBytes)
}
