// The HTTP half of the protocol (docs/protocol.md §1): create a session, read one back, health.

using System;
using System.Net.Http;
using System.Net.Http.Headers;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Samvad.Client
{
    /// <summary>An HTTP answer that was not a success; carries the server's error code when it sent one.</summary>
    public sealed class SamvadHttpException : Exception
    {
        public int StatusCode { get; private set; }
        /// <summary>`unauthorized`, `forbidden`, `not_found`, `invalid`, `rate_limited`, `capacity`, or null.</summary>
        public string Code { get; private set; }

        public SamvadHttpException(int status, string code, string message)
            : base(string.Format("HTTP {0} {1}: {2}", status, code ?? "?", message))
        {
            StatusCode = status;
            Code = code;
        }
    }

    public sealed class SamvadApi : IDisposable
    {
        readonly HttpClient _http;
        readonly bool _ownsHttp;

        /// <param name="baseUrl">The server's HTTP root, e.g. http://127.0.0.1:8000</param>
        public SamvadApi(string baseUrl, HttpClient http = null, TimeSpan? timeout = null)
        {
            if (string.IsNullOrEmpty(baseUrl))
            {
                throw new ArgumentException("baseUrl is required", "baseUrl");
            }
            BaseUri = new Uri(baseUrl.TrimEnd('/') + "/");
            _ownsHttp = http == null;
            _http = http ?? new HttpClient();
            if (_ownsHttp)
            {
                _http.Timeout = timeout ?? TimeSpan.FromSeconds(15);
            }
        }

        public Uri BaseUri { get; private set; }

        /// <summary>The learner's credential, sent as <c>Authorization: Bearer</c> when a session is created:
        /// a learner token your game's backend got for this learner (POST /api/learners/{id}/token with the
        /// admin key, which stays on the backend), or an assertion your login server signed. It binds the
        /// session to that learner; a <c>LearnerId</c> without it is refused (401). Null: an anonymous
        /// session (docs/security.md).</summary>
        public string Credential { get; set; }

        /// <summary>POST /api/sessions. Every field of the request is optional.</summary>
        public async Task<SessionInfo> CreateSessionAsync(CreateSessionRequest request = null,
                                                          CancellationToken cancel = default(CancellationToken))
        {
            string body = JsonConvert.SerializeObject(request ?? new CreateSessionRequest());
            using (var content = new StringContent(body, Encoding.UTF8, "application/json"))
            using (var message = new HttpRequestMessage(HttpMethod.Post, new Uri(BaseUri, "api/sessions")) { Content = content })
            {
                if (!string.IsNullOrEmpty(Credential))
                {
                    message.Headers.Authorization = new AuthenticationHeaderValue("Bearer", Credential);
                }
                using (var response = await _http.SendAsync(message, cancel).ConfigureAwait(false))
                {
                    string text = await response.Content.ReadAsStringAsync().ConfigureAwait(false);
                    EnsureSuccess(response, text);
                    return JsonConvert.DeserializeObject<SessionInfo>(text);
                }
            }
        }

        /// <summary>GET /api/sessions/{id} with a token of that session (either role).</summary>
        public async Task<SessionState> GetSessionAsync(string sessionId, string token,
                                                        CancellationToken cancel = default(CancellationToken))
        {
            var uri = new Uri(BaseUri, "api/sessions/" + Uri.EscapeDataString(sessionId));
            using (var message = new HttpRequestMessage(HttpMethod.Get, uri))
            {
                message.Headers.Authorization = new AuthenticationHeaderValue("Bearer", token);
                using (var response = await _http.SendAsync(message, cancel).ConfigureAwait(false))
                {
                    string text = await response.Content.ReadAsStringAsync().ConfigureAwait(false);
                    EnsureSuccess(response, text);
                    return JsonConvert.DeserializeObject<SessionState>(text);
                }
            }
        }

        /// <summary>GET /health as a JSON object.</summary>
        public async Task<JObject> HealthAsync(CancellationToken cancel = default(CancellationToken))
        {
            using (var response = await _http.GetAsync(new Uri(BaseUri, "health"), cancel).ConfigureAwait(false))
            {
                string text = await response.Content.ReadAsStringAsync().ConfigureAwait(false);
                EnsureSuccess(response, text);
                return JObject.Parse(text);
            }
        }

        /// <summary>The session socket's address for this server: http becomes ws, https becomes wss.</summary>
        public Uri SocketUri(string sessionId)
        {
            var builder = new UriBuilder(new Uri(BaseUri, "ws/sessions/" + Uri.EscapeDataString(sessionId)));
            builder.Scheme = BaseUri.Scheme == "https" ? "wss" : "ws";
            return builder.Uri;
        }

        static void EnsureSuccess(HttpResponseMessage response, string text)
        {
            if (response.IsSuccessStatusCode)
            {
                return;
            }
            string code = null;
            string message = text;
            try
            {
                var error = JObject.Parse(text)["error"] as JObject;
                if (error != null)
                {
                    code = (string)error["code"];
                    message = (string)error["message"];
                }
            }
            catch (JsonException)
            {
                // not our JSON error body: keep the raw text
            }
            throw new SamvadHttpException((int)response.StatusCode, code, message);
        }

        public void Dispose()
        {
            if (_ownsHttp)
            {
                _http.Dispose();
            }
        }
    }
}
