// A thin MonoBehaviour over Samvad.Client: where the socket plugs into a VR scene.
//
// Needs Unity's assemblies. build.sh also compiles it against a stand-in for them (StandIn/), with and
// without the two symbols below, and the harness runs it there against a live server (--scene).
// Optional integrations are behind scripting define symbols (Project Settings > Player > Scripting
// Define Symbols, or versionDefines in an .asmdef):
//   SAMVAD_XRI  XR Interaction Toolkit 2.x is installed: OnSelectEntered/OnSelectExited take its args
//   SAMVAD_TMP  TextMeshPro labels instead of (or as well as) uGUI Text
#if UNITY_5_3_OR_NEWER
using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using Samvad.Client;
using UnityEngine;
using UnityEngine.Events;
using UnityEngine.UI;
#if SAMVAD_TMP
using TMPro;
#endif
#if SAMVAD_XRI
using UnityEngine.XR.Interaction.Toolkit;
#endif

namespace Samvad.Unity
{
    [Serializable] public sealed class SamvadStringEvent : UnityEvent<string> { }
    [Serializable] public sealed class SamvadIntEvent : UnityEvent<int> { }

    [DisallowMultipleComponent]
    public sealed class SamvadSession : MonoBehaviour
    {
        [Header("Server")]
        [Tooltip("HTTP root of the Samvad server, e.g. https://samvad.example.org")]
        [SerializeField] string serverUrl = "http://127.0.0.1:8000";
        [SerializeField] string learnerId = "";
        [Tooltip("The learner's credential from your game's backend (docs/security.md); set it from code " +
                 "after your login, not in a scene file. Empty: an anonymous session.")]
        [SerializeField] string learnerToken = "";
        [SerializeField] string scenario = "jaipur-bazaar";
        [Tooltip("hi-IN, kn-IN, ta-IN, en-IN or hi-EN")]
        [SerializeField] string inputLanguage = "hi-EN";
        [SerializeField] string targetLanguage = "hi-IN";
        [Tooltip("beginner, intermediate or advanced (empty: the server's default, intermediate)")]
        [SerializeField] string level = "";
        [SerializeField] bool connectOnStart = true;
        [Tooltip("Ask for Ramesh's voice (reply.audio); play it with a SamvadVoice component")]
        [SerializeField] bool voice = false;

        [Header("Session handed over by your backend (leave empty to create one here)")]
        [SerializeField] string sessionId = "";
        [SerializeField] string playerToken = "";

        [Header("Scene hooks (all optional)")]
        [SerializeField] Slider happinessSlider;
        [SerializeField] Text stageLabel;
        [SerializeField] Text subtitleLabel;
        [SerializeField] Text hintLabel;
#if SAMVAD_TMP
        [SerializeField] TMP_Text stageLabelTmp;
        [SerializeField] TMP_Text subtitleLabelTmp;
        [SerializeField] TMP_Text hintLabelTmp;
#endif
        [SerializeField] Animator vendorAnimator;
        [Tooltip("Animator bool held true while Ramesh speaks")]
        [SerializeField] string talkingBool = "Talking";
        [Tooltip("Animator trigger fired once per reply (leave empty for none)")]
        [SerializeField] string replyTrigger = "";
        [Tooltip("Roughly how long a reply takes to say, per character, when no TTS reports its end")]
        [SerializeField] float secondsPerCharacter = 0.06f;

        [Header("Game events")]
        public SamvadStringEvent onVendorLine = new SamvadStringEvent();   // the reply text, for TTS
        public SamvadStringEvent onStageChanged = new SamvadStringEvent();
        public SamvadIntEvent onHappinessChanged = new SamvadIntEvent();
        public SamvadStringEvent onSessionEnded = new SamvadStringEvent(); // the outcome
        public SamvadStringEvent onConnectionProblem = new SamvadStringEvent();

        SamvadClient _client;
        SynchronizationContext _mainThread;
        readonly ConcurrentQueue<Action> _fallbackQueue = new ConcurrentQueue<Action>();
        string _streamed = "";
        float _talkUntil;
        bool _talking;

        public SamvadClient Client { get { return _client; } }
        public SessionState State { get { return _client == null ? null : _client.State; } }

        void Awake()
        {
            // Unity installs a UnitySynchronizationContext on the main thread: everything the client
            // raises is posted there, so handlers may touch GameObjects. If some host has none, a
            // queue drained in Update() does the same job.
            _mainThread = SynchronizationContext.Current ?? new QueueContext(_fallbackQueue);
        }

        async void Start()
        {
            if (!connectOnStart) return;
            try
            {
                await ConnectAsync();
            }
            catch (Exception ex)
            {
                Debug.LogError("Samvad: could not start the session: " + ex.Message);
                onConnectionProblem.Invoke(ex.Message);
            }
        }

        /// <summary>Creates a session (unless one was handed over) and opens the socket.</summary>
        public async Task ConnectAsync()
        {
            if (_client != null) return;
            if (string.IsNullOrEmpty(sessionId) || string.IsNullOrEmpty(playerToken))
            {
                using (var api = new SamvadApi(serverUrl) { Credential = string.IsNullOrEmpty(learnerToken) ? null : learnerToken })
                {
                    var info = await api.CreateSessionAsync(new CreateSessionRequest
                    {
                        LearnerId = string.IsNullOrEmpty(learnerId) ? null : learnerId,
                        Scenario = string.IsNullOrEmpty(scenario) ? null : scenario,
                        InputLanguage = string.IsNullOrEmpty(inputLanguage) ? null : inputLanguage,
                        TargetLanguage = string.IsNullOrEmpty(targetLanguage) ? null : targetLanguage,
                        Level = string.IsNullOrEmpty(level) ? null : level,
                    });
                    sessionId = info.SessionId;
                    playerToken = info.PlayerToken;
                }
            }
            _client = new SamvadClient(serverUrl, sessionId, playerToken, new SamvadClientOptions
            {
                EventContext = _mainThread,
                Log = line => Debug.Log(line),
                Voice = voice,
            });
            _client.Connected += OnConnected;
            _client.Disconnected += OnDisconnected;
            _client.Reply += OnReply;
            _client.ReplyDelta += OnReplyDelta;
            _client.ReplyWithdrawn += OnReplyWithdrawn;
            _client.Mood += OnMood;
            _client.Stage += OnStage;
            _client.SessionEnded += OnSessionEnded;
            _client.Snapshot += OnSnapshot;
            _client.Error += e => Debug.LogWarning("Samvad error " + e.Code + ": " + e.Message);
            await _client.ConnectAsync();
        }

        // ------------------------------------------------------------------ inputs

        /// <summary>Wire a grab interactable's Select Entered event here (or call it yourself).</summary>
        public void OnGrab(GameObject grabbed)
        {
            if (_client == null || grabbed == null) return;
            _client.SendScene(ItemName(grabbed));
        }

        /// <summary>Wire Select Exited here: the learner's hands are empty again.</summary>
        public void OnRelease()
        {
            if (_client == null) return;
            _client.SendScene(null);
        }

#if SAMVAD_XRI
        public void OnSelectEntered(SelectEnterEventArgs args)
        {
            OnGrab(args.interactableObject.transform.gameObject);
        }

        public void OnSelectExited(SelectExitEventArgs args)
        {
            OnRelease();
        }
#endif

        /// <summary>Your speech-to-text's final result: one learner turn.</summary>
        public void OnTranscript(string text, float confidence)
        {
            if (_client == null || string.IsNullOrEmpty(text)) return;
            var frame = _client.SendTranscript(text, Mathf.Clamp01(confidence));
            // The frame is kept and re-sent across reconnects until acked; refusals surface here.
            frame.Acked.ContinueWith(t => Debug.LogWarning("Samvad: transcript refused: " + t.Exception.InnerException.Message),
                                     CancellationToken.None, TaskContinuationOptions.OnlyOnFaulted,
                                     TaskScheduler.Default);
        }

        /// <summary>Interim STT hypotheses (optional): spectators may show them; never a turn.</summary>
        public void OnPartialTranscript(string text)
        {
            if (_client != null && !string.IsNullOrEmpty(text)) _client.SendPartialTranscript(text);
        }

        static string ItemName(GameObject grabbed)
        {
            var item = grabbed.GetComponentInParent<SamvadItem>();
            if (item != null && !string.IsNullOrEmpty(item.itemName)) return item.itemName;
            return grabbed.name.Replace("(Clone)", "").Trim();
        }

        // ------------------------------------------------------------------ outputs (main thread)

        void OnConnected(WelcomeEvent welcome)
        {
            if (!welcome.IsReconnect && welcome.State != null)
            {
                ShowHappiness(welcome.State.HappinessScore);
                ShowStage(welcome.State.Stage);
            }
        }

        void OnDisconnected(DisconnectInfo info)
        {
            if (!info.WillReconnect)
            {
                Debug.LogError("Samvad: " + info);
                onConnectionProblem.Invoke(info.ToString());
            }
        }

        void OnReplyDelta(ReplyDeltaEvent delta)
        {
            _streamed += delta.Text;
            ShowSubtitle(_streamed);
            Talk(delta.Text.Length);
        }

        void OnReplyWithdrawn(ReplyWithdrawnEvent withdrawn)
        {
            _streamed = "";
            ShowSubtitle("");
        }

        void OnReply(ReplyEvent reply)
        {
            _streamed = "";
            ShowSubtitle(reply.Text);
            SetText(hintLabel, reply.SuggestedUserResponse);
#if SAMVAD_TMP
            if (hintLabelTmp != null) hintLabelTmp.text = reply.SuggestedUserResponse;
#endif
            ShowHappiness(reply.HappinessScore);
            if (vendorAnimator != null && !string.IsNullOrEmpty(replyTrigger)) vendorAnimator.SetTrigger(replyTrigger);
            Talk(reply.Text.Length);
            onVendorLine.Invoke(reply.Text);
        }

        void OnMood(MoodEvent mood)
        {
            ShowHappiness(mood.HappinessScore);
        }

        void OnStage(StageEvent stage)
        {
            ShowStage(stage.To);
        }

        void OnSessionEnded(SessionEndedEvent ended)
        {
            onSessionEnded.Invoke(ended.Outcome);
        }

        void OnSnapshot(SnapshotEvent snapshot)
        {
            // The server could not replay what we missed: redraw from its state.
            if (snapshot.State == null) return;
            ShowHappiness(snapshot.State.HappinessScore);
            ShowStage(snapshot.State.Stage);
        }

        void ShowHappiness(int score)
        {
            if (happinessSlider != null)
            {
                happinessSlider.minValue = 0;
                happinessSlider.maxValue = 100;
                happinessSlider.value = score;
            }
            onHappinessChanged.Invoke(score);
        }

        void ShowStage(string stage)
        {
            SetText(stageLabel, stage);
#if SAMVAD_TMP
            if (stageLabelTmp != null) stageLabelTmp.text = stage;
#endif
            onStageChanged.Invoke(stage);
        }

        void ShowSubtitle(string text)
        {
            SetText(subtitleLabel, text);
#if SAMVAD_TMP
            if (subtitleLabelTmp != null) subtitleLabelTmp.text = text;
#endif
        }

        static void SetText(Text label, string text)
        {
            if (label != null) label.text = text ?? "";
        }

        void Talk(int characters)
        {
            _talkUntil = Mathf.Max(_talkUntil, Time.time) + characters * secondsPerCharacter;
            if (!_talking && vendorAnimator != null && !string.IsNullOrEmpty(talkingBool))
            {
                vendorAnimator.SetBool(talkingBool, true);
            }
            _talking = true;
        }

        /// <summary>Call from your TTS when Ramesh has finished speaking, to stop the mouth at once.</summary>
        public void StopTalking()
        {
            _talkUntil = 0f;
        }

        void Update()
        {
            Action pending;
            while (_fallbackQueue.TryDequeue(out pending)) pending();
            if (_talking && Time.time >= _talkUntil)
            {
                _talking = false;
                if (vendorAnimator != null && !string.IsNullOrEmpty(talkingBool)) vendorAnimator.SetBool(talkingBool, false);
            }
        }

        async void OnDestroy()
        {
            var client = _client;
            _client = null;
            if (client == null) return;
            // A polite close (code 1000) when there is time; Dispose never blocks the main thread.
            try
            {
                await client.CloseAsync(TimeSpan.FromSeconds(1));
            }
            finally
            {
                client.Dispose();
            }
        }

        /// <summary>Posts to a queue that Update() drains: the main thread without Unity's own context.</summary>
        sealed class QueueContext : SynchronizationContext
        {
            readonly ConcurrentQueue<Action> _queue;

            public QueueContext(ConcurrentQueue<Action> queue)
            {
                _queue = queue;
            }

            public override void Post(SendOrPostCallback callback, object state)
            {
                _queue.Enqueue(() => callback(state));
            }
        }
    }
}
#endif
