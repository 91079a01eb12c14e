// A STAND-IN FOR TESTS, NEVER SHIPPED TO UNITY. Written from scratch (no Unity code) so that
// clients/unity/Samvad.Unity compiles and runs with Mono here, where Unity's assemblies cannot be had.
// It keeps Unity's names and signatures (namespaces, parameter types, static or instance) for what
// those components use, so code that compiles against it compiles in Unity; the behaviour is only
// what the tests need, modelled on Unity's documentation:
//   - objects: GameObject, Component, Behaviour, MonoBehaviour, Transform; AddComponent honours
//     [RequireComponent] and [DisallowMultipleComponent]; a destroyed Object equals null.
//   - messages: Awake, OnEnable, Start, Update, LateUpdate, OnDisable, OnDestroy are found by name
//     (private too) and called by UnityStandIn.PlayerLoop, which a test drives frame by frame.
//   - the main thread: what Unity allows on its main thread only (Time.time, Text.text, ...) throws
//     UnityException elsewhere, and is counted in PlayerLoop.Violations.
// UnityEngine.Audio.cs has the audio and microphone, UnityEngine.Modules.cs uGUI, UnityEvent,
// TextMeshPro and the XR Interaction Toolkit; PlayerLoop.cs the loop; Hooks.cs the rest for tests.

using System;
using System.Collections.Generic;
using UnityStandIn;

namespace UnityEngine
{
    public class UnityException : Exception
    {
        public UnityException() { }
        public UnityException(string message) : base(message) { }
        public UnityException(string message, Exception innerException) : base(message, innerException) { }
    }

    public class Object
    {
        string _name = "";
        internal bool Destroyed;

        public string name
        {
            get { PlayerLoop.RequireMainThread("get_name"); return NameOf(); }
            set { PlayerLoop.RequireMainThread("set_name"); Rename(value); }
        }

        internal virtual string NameOf() { return _name; }
        internal virtual void Rename(string value) { _name = value ?? ""; }

        static bool IsNull(Object o) { return ReferenceEquals(o, null) || o.Destroyed; }

        // Unity's own comparison: an Object that was destroyed compares equal to null.
        public static bool operator ==(Object x, Object y)
        {
            bool xNull = IsNull(x), yNull = IsNull(y);
            if (xNull || yNull) return xNull && yNull;
            return ReferenceEquals(x, y);
        }

        public static bool operator !=(Object x, Object y) { return !(x == y); }
        public static implicit operator bool(Object exists) { return !IsNull(exists); }
        public override bool Equals(object other) { return this == other as Object; }
        public override int GetHashCode() { return base.GetHashCode(); }
        public override string ToString() { return NameOf() + " (" + GetType().FullName + ")"; }

        public static void Destroy(Object obj) { PlayerLoop.RequireMainThread("Destroy"); PlayerLoop.DestroyAtEndOfFrame(obj); }
    }

    public sealed class GameObject : Object
    {
        internal readonly List<Component> Components = new List<Component>();
        internal bool ActiveSelf = true;

        public GameObject() : this("New Game Object") { }

        public GameObject(string name)
        {
            PlayerLoop.RequireMainThread("GameObject..ctor");
            Rename(name);
            Components.Add(new Transform { Owner = this });
            PlayerLoop.Register(this);
        }

        public Transform transform { get { return (Transform)Components[0]; } }
        public GameObject gameObject { get { return this; } }
        public bool activeSelf { get { return ActiveSelf; } }
        public bool activeInHierarchy { get { return ActiveInHierarchy; } }

        internal bool ActiveInHierarchy
        {
            get
            {
                for (var t = transform; t != null; t = t.Parent) if (!t.Owner.ActiveSelf) return false;
                return !Destroyed;
            }
        }

        public void SetActive(bool value)
        {
            PlayerLoop.RequireMainThread("SetActive");
            if (value == ActiveSelf) return;
            bool was = ActiveInHierarchy;
            ActiveSelf = value;
            PlayerLoop.ActivationChanged(this, was);
        }

        public T AddComponent<T>() where T : Component { return (T)AddComponent(typeof(T)); }

        public Component AddComponent(Type componentType)
        {
            PlayerLoop.RequireMainThread("AddComponent");
            return PlayerLoop.AddComponent(this, componentType);
        }

        public T GetComponent<T>() { return (T)(object)GetComponent(typeof(T)); }

        public Component GetComponent(Type type)
        {
            PlayerLoop.RequireMainThread("GetComponent");
            foreach (var c in Components) if (!c.Destroyed && type.IsInstanceOfType(c)) return c;
            return null;
        }

        public T GetComponentInParent<T>()
        {
            for (var t = transform; t != null; t = t.Parent)
            {
                if (!t.Owner.ActiveInHierarchy) continue;  // Unity's default: active objects only
                var found = t.Owner.GetComponent(typeof(T));
                if (found != null) return (T)(object)found;
            }
            return default(T);
        }
    }

    public class Component : Object
    {
        internal GameObject Owner;

        public GameObject gameObject { get { PlayerLoop.RequireMainThread("get_gameObject"); return Owner; } }
        public Transform transform { get { PlayerLoop.RequireMainThread("get_transform"); return Owner.transform; } }

        internal override string NameOf() { return Owner.NameOf(); }
        internal override void Rename(string value) { Owner.Rename(value); }

        public T GetComponent<T>() { return Owner.GetComponent<T>(); }
        public Component GetComponent(Type type) { return Owner.GetComponent(type); }
        public T GetComponentInParent<T>() { return Owner.GetComponentInParent<T>(); }
    }

    public class Behaviour : Component
    {
        internal bool EnabledSelf = true;

        public bool enabled
        {
            get { PlayerLoop.RequireMainThread("get_enabled"); return EnabledSelf; }
            set
            {
                PlayerLoop.RequireMainThread("set_enabled");
                if (value == EnabledSelf) return;
                EnabledSelf = value;
                PlayerLoop.EnabledChanged(this);
            }
        }

        public bool isActiveAndEnabled { get { return EnabledSelf && Owner.ActiveInHierarchy; } }
    }

    public class MonoBehaviour : Behaviour
    {
        // Where the player loop has got to with this script (UnityStandIn.PlayerLoop).
        internal bool Awoken, Started, EnableSent;

        public static void print(object message) { Debug.Log(message); }
    }

    public class Transform : Component
    {
        internal Transform Parent;
        internal readonly List<Transform> Children = new List<Transform>();

        public Transform parent
        {
            get { PlayerLoop.RequireMainThread("get_parent"); return Parent; }
            set { SetParent(value); }
        }


        public Transform root
        {
            get
            {
                var t = this;
                while (t.Parent != null) t = t.Parent;
                return t;
            }
        }

        public void SetParent(Transform p) { SetParent(p, true); }

        public void SetParent(Transform parent, bool worldPositionStays)
        {
            PlayerLoop.RequireMainThread("SetParent");
            bool was = Owner.ActiveInHierarchy;
            if (Parent != null) Parent.Children.Remove(this);
            Parent = parent;
            if (parent != null) parent.Children.Add(this);
            PlayerLoop.ActivationChanged(Owner, was);
        }
    }

    public static class Debug
    {
        // Thread-safe in Unity as here: every line is kept by UnityStandIn.ConsoleWindow.
        public static void Log(object message) { UnityStandIn.ConsoleWindow.Add(LogType.Log, message); }
        public static void Log(object message, Object context) { Log(message); }
        public static void LogWarning(object message) { UnityStandIn.ConsoleWindow.Add(LogType.Warning, message); }
        public static void LogWarning(object message, Object context) { LogWarning(message); }
        public static void LogError(object message) { UnityStandIn.ConsoleWindow.Add(LogType.Error, message); }
        public static void LogError(object message, Object context) { LogError(message); }
        public static void LogException(Exception exception) { UnityStandIn.ConsoleWindow.Add(LogType.Exception, exception); }
    }

    public enum LogType { Error = 0, Assert = 1, Warning = 2, Log = 3, Exception = 4 }

    public static class Time
    {
        internal static float Now;

        public static float time { get { PlayerLoop.RequireMainThread("get_time"); return Now; } }
    }

    public static class Mathf
    {
        public static float Clamp01(float value) { return value < 0f ? 0f : value > 1f ? 1f : value; }
        public static float Clamp(float value, float min, float max) { return value < min ? min : value > max ? max : value; }
        public static float Max(float a, float b) { return a > b ? a : b; }
    }

    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public sealed class SerializeField : Attribute { }

    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = true)]
    public abstract class PropertyAttribute : Attribute
    {
        public int order { get; set; }
    }

    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public class TooltipAttribute : PropertyAttribute
    {
        public readonly string tooltip;
        public TooltipAttribute(string tooltip) { this.tooltip = tooltip; }
    }

    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = true)]
    public class HeaderAttribute : PropertyAttribute
    {
        public readonly string header;
        public HeaderAttribute(string header) { this.header = header; }
    }

    [AttributeUsage(AttributeTargets.Class, AllowMultiple = true, Inherited = true)]
    public sealed class RequireComponent : Attribute
    {
        public Type m_Type0;
        public Type m_Type1;
        public Type m_Type2;
        public RequireComponent(Type requiredComponent) { m_Type0 = requiredComponent; }
        public RequireComponent(Type requiredComponent, Type requiredComponent2) : this(requiredComponent) { m_Type1 = requiredComponent2; }
        public RequireComponent(Type requiredComponent, Type requiredComponent2, Type requiredComponent3)
            : this(requiredComponent, requiredComponent2) { m_Type2 = requiredComponent3; }
    }

    [AttributeUsage(AttributeTargets.Class, Inherited = false)]
    public sealed class DisallowMultipleComponent : Attribute { }

    public class Renderer : Component { }

    /// <summary>A face's blendshapes: weights 0-100 by index, set on the main thread only.</summary>
    public class SkinnedMeshRenderer : Renderer
    {
        readonly Dictionary<int, float> _weights = new Dictionary<int, float>();

        public void SetBlendShapeWeight(int index, float value)
        {
            PlayerLoop.RequireMainThread("SetBlendShapeWeight");
            _weights[index] = value;
        }

        public float GetBlendShapeWeight(int index)
        {
            PlayerLoop.RequireMainThread("GetBlendShapeWeight");
            float value;
            return _weights.TryGetValue(index, out value) ? value : 0f;
        }
    }

    public class Animator : Behaviour
    {
        readonly Dictionary<string, bool> _bools = new Dictionary<string, bool>();
        internal readonly Dictionary<string, int> Triggers = new Dictionary<string, int>();

        public void SetBool(string name, bool value) { PlayerLoop.RequireMainThread("SetBool"); _bools[name] = value; }

        public bool GetBool(string name)
        {
            PlayerLoop.RequireMainThread("GetBool");
            bool value;
            return _bools.TryGetValue(name, out value) && value;
        }

        public void SetTrigger(string name)
        {
            PlayerLoop.RequireMainThread("SetTrigger");
            int count;
            Triggers.TryGetValue(name, out count);
            Triggers[name] = count + 1;
        }

    }
}
