// The session socket of docs/protocol.md §2–§6 as a C# object.
//
// One supervisor task owns the connection life cycle: connect, run the receive loop, and on a drop
// wait (exponential backoff with jitter) and connect again, unless the close code forbids it. Each
// connection has its own single-writer send loop, because ClientWebSocket allows one outstanding
// send at a time, and its own keepalive loop. All shared state sits behind one lock; events and
// per-frame callbacks are raised outside it, on the configured SynchronizationContext or inline.
//
// The class is split by concern, one file each:
//   SamvadClient.cs             state, events, life cycle (connect, close, dispose), raising events
//   SamvadClient.Sending.cs     the frames the client sends: scene, transcript, the commands (hint,
//                               repeat, undo, stop), playback, silence, ping, resume
//   SamvadClient.Transport.cs   the supervisor (reconnect and backoff) and the socket's read, write
//                               and keepalive loops
//   SamvadClient.Receiving.cs   server frames: welcome, acks, errors, sequenced events, folding
//   SamvadClient.Connection.cs  one socket and its outgoing queue

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net.WebSockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Samvad.Client
{
    public sealed partial class SamvadClient : IDisposable
    {
        /// <summary>The subprotocol this client offers: JSON in text frames (msgpack is not used).</summary>
        public const string Subprotocol = "samvad.v1.json";

        static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);

        readonly object _gate = new object();
        readonly SamvadClientOptions _options;
        readonly Uri _socketUri;
        readonly string _token;
        readonly SeqTracker _seq = new SeqTracker();
        readonly List<PendingFrame> _unacked = new List<PendingFrame>();
        readonly Dictionary<string, PendingFrame> _awaitingReply = new Dictionary<string, PendingFrame>();
        readonly Dictionary<string, TaskCompletionSource<PongEvent>> _pings =
            new Dictionary<string, TaskCompletionSource<PongEvent>>();
        readonly ClientStats _stats = new ClientStats();
        readonly Stopwatch _clock = Stopwatch.StartNew();
        readonly CancellationTokenSource _lifetime = new CancellationTokenSource();
        readonly TaskCompletionSource<WelcomeEvent> _firstWelcome =
            new TaskCompletionSource<WelcomeEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
        readonly Random _random;

        Task _supervisor;
        Connection _current;
        bool _live; // `welcome` arrived on _current and the unacknowledged frames were queued behind it
        string _resumeId;
        SessionState _state;
        TipsEvent _latestTips;
        LearnerReport _report;
        string _role;
        bool _closing;
        Exception _stoppedBecause;
        int _connectionNumber;
        long _pingNumber;
        volatile bool _discardIncoming;

        /// <param name="serverUrl">The server root: http(s)://host:port (or ws(s)://host:port).</param>
        /// <param name="sessionId">From POST /api/sessions.</param>
        /// <param name="token">The player token (read-write) or a spectator token (read-only).</param>
        public SamvadClient(string serverUrl, string sessionId, string token, SamvadClientOptions options = null)
        {
            if (string.IsNullOrEmpty(serverUrl)) throw new ArgumentException("serverUrl is required", "serverUrl");
            if (string.IsNullOrEmpty(sessionId)) throw new ArgumentException("sessionId is required", "sessionId");
            if (string.IsNullOrEmpty(token)) throw new ArgumentException("token is required", "token");
            _options = options ?? new SamvadClientOptions();
            _token = token;
            SessionId = sessionId;
            var root = new Uri(serverUrl.TrimEnd('/') + "/");
            var builder = new UriBuilder(new Uri(root, "ws/sessions/" + Uri.EscapeDataString(sessionId)));
            builder.Scheme = root.Scheme == "https" || root.Scheme == "wss" ? "wss" : "ws";
            var query = new System.Collections.Generic.List<string>();
            if (_options.TokenInQuery) query.Add("token=" + Uri.EscapeDataString(token));
            if (_options.Voice) query.Add("voice=1");
            if (_options.Voice && !_options.Visemes) query.Add("visemes=0");
            if (query.Count > 0) builder.Query = string.Join("&", query);
            _socketUri = builder.Uri;
            _random = _options.RandomSeed.HasValue ? new Random(_options.RandomSeed.Value) : new Random();
        }

        // ------------------------------------------------------------------ events

        /// <summary>A socket is open and `welcome` arrived. <see cref="WelcomeEvent.IsReconnect"/> tells a
        /// reconnect from the first connection.</summary>
        public event Action<WelcomeEvent> Connected;
        public event Action<DisconnectInfo> Disconnected;
        public event Action<ReconnectInfo> Reconnecting;
        public event Action<ReplyEvent> Reply;
        public event Action<ReplyDeltaEvent> ReplyDelta;
        public event Action<ReplyWithdrawnEvent> ReplyWithdrawn;
        /// <summary>What the recogniser heard of one of the learner's utterances (any connection).</summary>
        public event Action<SpeechEvent> SpeechHeard;
        /// <summary>An open microphone's turn so far, at a pause in it (`speech.partial`).</summary>
        public event Action<SpeechPartialEvent> SpeechPartial;
        /// <summary>A piece of the vendor's voice (only with <see cref="SamvadClientOptions.Voice"/>);
        /// <see cref="VendorVoice"/> plays them.</summary>
        public event Action<ReplyAudioEvent> ReplyAudio;
        public event Action<MoodEvent> Mood;
        public event Action<StageEvent> Stage;
        public event Action<SessionEndedEvent> SessionEnded;
        public event Action<SnapshotEvent> Snapshot;
        public event Action<ErrorEvent> Error;
        public event Action<AckEvent> Ack;
        public event Action<PongEvent> Pong;
        /// <summary>Coaching cards after each answered learner turn (grounded in the teacher's notes,
        /// or one generic card); the game shows them however it likes.</summary>
        public event Action<TipsEvent> Tips;
        /// <summary>The learner report, after `SessionEnded`: score, suggestions, cards earned.</summary>
        public event Action<SessionReportEvent> Report;
        /// <summary>The vendor's last line again, after <see cref="Repeat"/>.</summary>
        public event Action<RepeatEvent> Repeated;
        /// <summary>Help for the learner's next line: after <see cref="Hint"/>, or offered unasked
        /// (<see cref="HintEvent.Offered"/>, a beginner's after a silence).</summary>
        public event Action<HintEvent> HintReceived;
        /// <summary>A turn was taken back (<see cref="Undo"/>). <see cref="State"/> is already the
        /// event's state when this is raised.</summary>
        public event Action<UndoEvent> Undone;
        /// <summary>What the learner heard of a reply (<see cref="ReportPlayback"/>); says when a price
        /// the learner did not hear stopped binding. <see cref="State"/>'s VendorQuote follows it.</summary>
        public event Action<HeardEvent> Heard;
        /// <summary>A reply marked "nudge": the learner was silent (the server's timer or
        /// <see cref="Silence"/>). Raised after <see cref="Reply"/>, which every reply raises.</summary>
        public event Action<ReplyEvent> NudgeReceived;
        /// <summary>A reply marked "welcome_back": the vendor's recap for a learner back after a long
        /// absence. Raised after <see cref="Reply"/>.</summary>
        public event Action<ReplyEvent> WelcomedBack;

        // ------------------------------------------------------------------ state

        public string SessionId { get; private set; }

        /// <summary>"player" or "spectator", once welcomed.</summary>
        public string Role { get { lock (_gate) return _role; } }

        /// <summary>The seq of the last session event applied.</summary>
        public long LastSeq { get { lock (_gate) return _seq.LastSeq; } }

        /// <summary>The client's view of the session: welcome's state with every applied event folded in.
        /// A copy; null before the first welcome.</summary>
        public SessionState State { get { lock (_gate) return _state == null ? null : _state.Copy(); } }

        /// <summary>The latest `tips` event applied, or null before the first answered turn.</summary>
        public TipsEvent LatestTips { get { lock (_gate) return _latestTips; } }

        /// <summary>The learner report once the session has ended, else null.</summary>
        public LearnerReport LearnerReport { get { lock (_gate) return _report; } }

        public bool IsConnected { get { lock (_gate) return _live; } }

        /// <summary>Frames sent (or waiting to be) and not yet acknowledged.</summary>
        public int PendingCount { get { lock (_gate) return _unacked.Count; } }

        public ClientStats Stats { get { lock (_gate) return _stats.Copy(); } }

        /// <summary>Set when the client stopped for good (and why).</summary>
        public Exception StoppedBecause { get { lock (_gate) return _stoppedBecause; } }

        /// <summary>Debug only: while true, every incoming frame is thrown away unread, as if the network
        /// lost it. Lets a test make the server's ack and reply go missing before a <see cref="ForceDrop"/>.
        /// Cleared by itself when the connection ends, so the next connection hears everything.</summary>
        public bool DebugDiscardIncoming
        {
            get { return _discardIncoming; }
            set { _discardIncoming = value; }
        }

        // ------------------------------------------------------------------ life cycle

        /// <summary>Starts connecting (and reconnecting whenever allowed). Completes with the first
        /// `welcome`; faults if the server refuses the session for good (4401, 4403, 4404, ...).</summary>
        public Task<WelcomeEvent> ConnectAsync(CancellationToken cancel = default(CancellationToken))
        {
            lock (_gate)
            {
                if (_closing) throw new ObjectDisposedException("SamvadClient");
                if (_supervisor == null)
                {
                    var life = _lifetime.Token;
                    _supervisor = Task.Run(() => SuperviseAsync(life));
                }
            }
            if (!cancel.CanBeCanceled)
            {
                return _firstWelcome.Task;
            }
            var waiter = new TaskCompletionSource<WelcomeEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            var registration = cancel.Register(() => waiter.TrySetCanceled());
            _firstWelcome.Task.ContinueWith(t =>
            {
                registration.Dispose();
                if (t.IsFaulted) waiter.TrySetException(t.Exception.InnerExceptions);
                else if (t.IsCanceled) waiter.TrySetCanceled();
                else waiter.TrySetResult(t.Result);
            }, TaskContinuationOptions.ExecuteSynchronously);
            return waiter.Task;
        }

        /// <summary>Closes the socket politely (close code 1000) and stops reconnecting. Frames still
        /// unacknowledged fault with <see cref="SamvadClosedException"/>.</summary>
        public async Task CloseAsync(TimeSpan? timeout = null)
        {
            Connection conn;
            Task supervisor;
            lock (_gate)
            {
                _closing = true;
                conn = _live ? _current : null;
                supervisor = _supervisor;
            }
            var limit = timeout ?? TimeSpan.FromSeconds(2);
            if (conn != null && supervisor != null)
            {
                conn.EnqueueClose();
                // The server answers our close frame with its own; the receive loop then ends.
                await Task.WhenAny(supervisor, Task.Delay(limit)).ConfigureAwait(false);
            }
            Shutdown();
            if (supervisor != null)
            {
                await Task.WhenAny(supervisor, Task.Delay(limit)).ConfigureAwait(false);
            }
            Stop(new SamvadClosedException("the client was closed"));
        }

        /// <summary>Stops at once: aborts the socket without a close handshake. Safe on Unity's main
        /// thread (never blocks).</summary>
        public void Dispose()
        {
            lock (_gate)
            {
                _closing = true;
            }
            Shutdown();
            Stop(new SamvadClosedException("the client was disposed"));
        }

        void Shutdown()
        {
            Connection conn;
            lock (_gate)
            {
                conn = _current;
            }
            try { _lifetime.Cancel(); } catch (ObjectDisposedException) { }
            if (conn != null) conn.Abort("the client is closing");
        }

        /// <summary>Debug and tests: break the current socket as a network failure would. The client
        /// reconnects, resumes and re-sends what is unacknowledged, exactly as after a real drop.</summary>
        public void ForceDrop()
        {
            Connection conn;
            lock (_gate)
            {
                conn = _current;
            }
            if (conn != null)
            {
                LogLine("force-dropping connection #" + conn.Number);
                conn.Abort("dropped on purpose (ForceDrop)");
            }
        }

        // ------------------------------------------------------------------ stopping and helpers

        void Stop(Exception because)
        {
            var failed = new List<PendingFrame>();
            List<TaskCompletionSource<PongEvent>> pings;
            lock (_gate)
            {
                if (_stoppedBecause == null) _stoppedBecause = because;
                because = _stoppedBecause;
                failed.AddRange(_unacked);
                foreach (var waiting in _awaitingReply.Values)
                {
                    if (!failed.Contains(waiting)) failed.Add(waiting);
                }
                _unacked.Clear();
                _awaitingReply.Clear();
                pings = new List<TaskCompletionSource<PongEvent>>(_pings.Values);
                _pings.Clear();
            }
            foreach (var frame in failed) frame.Fail(because);
            foreach (var ping in pings) ping.TrySetException(because);
            _firstWelcome.TrySetException(because);
        }

        void Raise(Action action)
        {
            var context = _options.EventContext;
            if (context != null)
            {
                context.Post(RunHandler, action);
            }
            else
            {
                RunHandler(action);
            }
        }

        void RunHandler(object state)
        {
            try
            {
                ((Action)state)();
            }
            catch (Exception ex)
            {
                // A throwing game handler must not break the receive loop.
                LogLine("an event handler threw: " + ex);
            }
        }

        double NowMs()
        {
            return _clock.Elapsed.TotalMilliseconds;
        }

        void LogLine(string line)
        {
            var log = _options.Log;
            if (log == null) return;
            try
            {
                log("[samvad " + SessionId + "] " + line);
            }
            catch (Exception)
            {
                // logging must never take the client down
            }
        }

        static string Describe(Exception ex)
        {
            if (ex == null) return "closed";
            var inner = ex;
            while (inner.InnerException != null && (inner is AggregateException || inner is WebSocketException))
            {
                inner = inner.InnerException;
            }
            return inner == ex ? ex.GetType().Name + ": " + ex.Message
                               : ex.GetType().Name + ": " + ex.Message + " (" + inner.Message + ")";
        }
    }
}
