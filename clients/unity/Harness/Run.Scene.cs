// --scene: Samvad.Unity's MonoBehaviours against a live server, in the stand-in's player loop
// (StandIn/PlayerLoop.cs) on this thread as Unity's main thread. The scene is what README's steps
// build: Ramesh with a SamvadSession (serialized fields set before Awake, as a loaded scene has
// them), uGUI and TextMeshPro labels, a slider and an Animator; a tomato whose XRGrabInteractable
// (on a child) is wired to OnSelectEntered / OnSelectExited; an apple without a SamvadItem. A hand
// grabs the tomato, the learner speaks a line through OnTranscript, the frames run until Ramesh's
// reply reaches the labels and the UnityEvents; then releases, the apple, and OnDestroy's close.
// Last, a second session in a host without Unity's SynchronizationContext (the fallback queue).
// The facts say what the scene showed; the test compares them with the server's own record.

using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Samvad.Client;
using Samvad.Unity;
using TMPro;
using UnityEngine;
using UnityEngine.UI;
using UnityEngine.XR.Interaction.Toolkit;
using UnityStandIn;

namespace Samvad.Harness
{
    sealed partial class Run
    {
        /// <summary>The learner's line when the command line gives none.</summary>
        public const string SceneLine = "Namaste bhaiya, ye tamatar kitne ka hai?";

        /// <summary>What a scene's UnityEvents delivered, and how many came off the main thread.</summary>
        sealed class SceneEvents
        {
            public readonly List<string> VendorLines = new List<string>();
            public readonly List<string> Stages = new List<string>();
            public readonly List<int> Happiness = new List<int>();
            public readonly List<string> Ended = new List<string>();
            public readonly List<string> Problems = new List<string>();
            public int OffMainThread;

            public SceneEvents(SamvadSession session)
            {
                session.onVendorLine.AddListener(line => Add(VendorLines, line));
                session.onStageChanged.AddListener(stage => Add(Stages, stage));
                session.onHappinessChanged.AddListener(score => Add(Happiness, score));
                session.onSessionEnded.AddListener(outcome => Add(Ended, outcome));
                session.onConnectionProblem.AddListener(problem => Add(Problems, problem));
            }

            void Add<T>(List<T> list, T value)
            {
                if (!PlayerLoop.IsMainThread) OffMainThread++;
                list.Add(value);
            }
        }

        double _sceneDeadline;
        string _sceneLine;

        /// <summary>Runs on the calling thread, which becomes Unity's main thread. Without a WAV, the
        /// learner types <paramref name="line"/>; with one, speaks it.</summary>
        public void Scene(TimeSpan limit, string wavPath, string line)
        {
            _sceneLine = line;
            PlayerLoop.Install();
            ConsoleWindow.Echo = _verbose ? Console.Error : null;
            _sceneDeadline = PlayerLoop.RealSeconds() + limit.TotalSeconds;
            try
            {
                if (wavPath == null)
                {
                    PlayScene();
                    PlayWithoutUnityContext();
                }
                else
                {
                    PlayVoiceScene(wavPath);
                }
            }
            catch (Exception ex)
            {
                Fail("unexpected " + ex.GetType().Name + ": " + ex.Message);
                if (_verbose) Console.Error.WriteLine(ex);
            }
            finally
            {
                AudioThread.Stop();
            }
            Fact("unity_errors", new JArray(ConsoleWindow.Errors));
            Fact("main_thread_violations", new JArray(PlayerLoop.Violations));
            Check(ConsoleWindow.Errors.Length == 0, "nothing was logged as an error or exception");
            Check(PlayerLoop.Violations.Length == 0, "no Unity API was touched off the main thread");
        }

        /// <summary>Frames until <paramref name="done"/>, within a step and the run's time limit.</summary>
        void Until(Func<bool> done, string what)
        {
            double left = Math.Max(0.1, _sceneDeadline - PlayerLoop.RealSeconds());
            PlayerLoop.RunUntil(done, TimeSpan.FromSeconds(Math.Min(Step.TotalSeconds, left)), what);
        }

        /// <summary>Frames run while the task is pending, as a coroutine would wait for it.</summary>
        T Await<T>(Task<T> task, string what)
        {
            Until(() => task.IsCompleted, what);
            return task.GetAwaiter().GetResult();
        }

        static T Label<T>(GameObject canvas, string name) where T : Component
        {
            var go = new GameObject(name);
            go.transform.SetParent(canvas.transform, false);
            return go.AddComponent<T>();
        }

        /// <summary>Ramesh, inactive while his serialized fields are set, as a scene file holds them.</summary>
        SamvadSession Ramesh(string learner, out GameObject ramesh)
        {
            ramesh = new GameObject("Ramesh");
            ramesh.SetActive(false);
            var session = ramesh.AddComponent<SamvadSession>();
            Serialized.Set(session, "serverUrl", _url);
            Serialized.Set(session, "learnerId", Learner(learner) ?? "");
            Serialized.Set(session, "learnerToken", LearnerToken ?? "");
            Serialized.Set(session, "level", "beginner");  // suggestions for the hint label
            return session;
        }

        string ServerItem(SamvadSession session)
        {
            var pending = Task.Run(async () =>
            {
                using (var api = new SamvadApi(_url))
                {
                    return await api.GetSessionAsync(Serialized.Get<string>(session, "sessionId"),
                                                     Serialized.Get<string>(session, "playerToken")).ConfigureAwait(false);
                }
            });
            return Await(pending, "GET /api/sessions/{id}").ObjectGrabbed;
        }

        void PlayScene()
        {
            var canvas = new GameObject("Canvas");
            var stage = Label<Text>(canvas, "Stage");
            var subtitle = Label<Text>(canvas, "Subtitle");
            var hint = Label<Text>(canvas, "Hint");
            var stageTmp = Label<TextMeshProUGUI>(canvas, "StageTMP");
            var subtitleTmp = Label<TextMeshProUGUI>(canvas, "SubtitleTMP");
            var hintTmp = Label<TextMeshProUGUI>(canvas, "HintTMP");
            var slider = Label<Slider>(canvas, "Happiness");
            GameObject ramesh;
            var session = Ramesh("unity-scene", out ramesh);
            var animator = ramesh.AddComponent<Animator>();
            Serialized.Set(session, "stageLabel", stage);
            Serialized.Set(session, "subtitleLabel", subtitle);
            Serialized.Set(session, "hintLabel", hint);
            Serialized.Set(session, "stageLabelTmp", stageTmp);
            Serialized.Set(session, "subtitleLabelTmp", subtitleTmp);
            Serialized.Set(session, "hintLabelTmp", hintTmp);
            Serialized.Set(session, "happinessSlider", slider);
            Serialized.Set(session, "vendorAnimator", animator);
            Serialized.Set(session, "replyTrigger", "Reply");
            var events = new SceneEvents(session);
            Check(ramesh.AddComponent<SamvadSession>() == null, "[DisallowMultipleComponent]: a second session is refused");
            ConsoleWindow.Clear();  // that refusal is logged as an error, by design
            ramesh.SetActive(true);

            Until(() => events.Stages.Count > 0 || events.Problems.Count > 0, "the welcome reaching the scene");
            Check(events.Problems.Count == 0, "connected without a problem: " + string.Join("; ", events.Problems));
            Fact("welcome_stage", events.Stages[0]);
            Fact("welcome_happiness", events.Happiness.Count > 0 ? events.Happiness[0] : -1);

            // A hand grabs the tomato by its mesh: the SamvadItem on its parent names it.
            var tomato = new GameObject("Veg_03");
            tomato.AddComponent<SamvadItem>().itemName = "Tomato";
            var mesh = new GameObject("Veg_03_Mesh(Clone)");
            mesh.transform.SetParent(tomato.transform);
            var tomatoGrab = mesh.AddComponent<XRGrabInteractable>();
            var apple = new GameObject("Apple(Clone)").AddComponent<XRGrabInteractable>();
            foreach (var grab in new[] { tomatoGrab, apple })
            {
                grab.selectEntered.AddListener(session.OnSelectEntered);
                grab.selectExited.AddListener(session.OnSelectExited);
            }
            Hands.Grab(tomatoGrab);

            session.OnTranscript(_sceneLine, 0.95f);
            Until(() => events.VendorLines.Count > 0, "Ramesh's reply reaching onVendorLine");
            Fact("talking_after_reply", animator.GetBool("Talking"));
            PlayerLoop.RunFrames(10);  // the turn's mood and stage follow its reply
            Fact("vendor_lines", new JArray(events.VendorLines.ToArray()));
            Fact("subtitle", subtitle.text);
            Fact("subtitle_tmp", subtitleTmp.text);
            Fact("hint", hint.text);
            Fact("hint_tmp", hintTmp.text);
            Fact("stage_label", stage.text);
            Fact("stage_label_tmp", stageTmp.text);
            Fact("stages", new JArray(events.Stages.ToArray()));
            Fact("happiness_events", new JArray(events.Happiness.ToArray()));
            Fact("slider", slider.value);
            Fact("reply_triggers", Inspect.Triggers(animator, "Reply"));
            Fact("item_held", ServerItem(session));

            session.StopTalking();
            PlayerLoop.RunFrames(2);
            Fact("talking_after_stop", animator.GetBool("Talking"));

            // Let go of the tomato, take the apple (no SamvadItem: its name, without "(Clone)").
            Hands.Release(tomatoGrab);
            Until(() => session.Client.PendingCount == 0, "the release acknowledged");
            Fact("item_after_release", ServerItem(session));
            Hands.Grab(apple);
            Until(() => session.Client.PendingCount == 0, "the apple's grab acknowledged");
            Fact("item_apple", ServerItem(session));
            Fact("session_id", Serialized.Get<string>(session, "sessionId"));
            Fact("player_token", Serialized.Get<string>(session, "playerToken"));

            // Destroying Ramesh closes the socket politely from OnDestroy, without blocking a frame.
            var client = session.Client;
            UnityEngine.Object.Destroy(ramesh);
            PlayerLoop.Frame();
            Fact("destroyed_equals_null", session == null);
            Until(() => !client.IsConnected && client.StoppedBecause != null, "OnDestroy closing the socket");
            Fact("closed_because", client.StoppedBecause.GetType().Name);
            PlayerLoop.RunFrames(5);  // OnDestroy's last continuation (Dispose) runs on a later frame
            Fact("problems", new JArray(events.Problems.ToArray()));
            Fact("events_off_main_thread", events.OffMainThread);
        }

        /// <summary>A host without Unity's SynchronizationContext: the session falls back to its own
        /// queue, drained in Update, and the reply still reaches the scene on the main thread.</summary>
        void PlayWithoutUnityContext()
        {
            PlayerLoop.Install(unityContext: false);
            GameObject ramesh;
            var session = Ramesh("unity-scene-no-context", out ramesh);
            var subtitle = Label<Text>(new GameObject("Canvas2"), "Subtitle");
            Serialized.Set(session, "subtitleLabel", subtitle);
            var events = new SceneEvents(session);
            ramesh.SetActive(true);
            Until(() => events.Stages.Count > 0 || events.Problems.Count > 0, "the welcome without Unity's context");
            session.OnTranscript(_sceneLine, 0.95f);
            Until(() => events.VendorLines.Count > 0, "the reply without Unity's context");
            Fact("fallback", new JObject
            {
                ["vendor_line"] = events.VendorLines[0],
                ["subtitle"] = subtitle.text,
                ["events_off_main_thread"] = events.OffMainThread,
                ["problems"] = events.Problems.Count,
            });
            var client = session.Client;
            UnityEngine.Object.Destroy(ramesh);
            Until(() => client.StoppedBecause != null, "OnDestroy closing the socket without Unity's context");
        }
    }
}
